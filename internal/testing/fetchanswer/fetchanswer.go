// Package fetchanswer builds a broker's answer to one partition of a fetch
// request, for tests whose kfake control hooks answer as kfake cannot (a
// truncated leader, a broker serving old message formats).
package fetchanswer

import "github.com/twmb/franz-go/pkg/kmsg"

// One answers fr for partition of topic rt alone (named as fr named it: by
// name, or by id from v13), with what fill sets on the partition's part.
func One(fr *kmsg.FetchRequest, rt kmsg.FetchRequestTopic, partition int32, fill func(*kmsg.FetchResponseTopicPartition)) *kmsg.FetchResponse {
	resp := fr.ResponseKind().(*kmsg.FetchResponse)
	st := kmsg.NewFetchResponseTopic()
	st.Topic, st.TopicID = rt.Topic, rt.TopicID
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition = partition
	fill(&sp)
	st.Partitions = append(st.Partitions, sp)
	resp.Topics = append(resp.Topics, st)
	return resp
}
