package kafkaconn

import (
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DynamicTopicConfigs are a topic's own (dynamic) configs that a mirror
// copies: not excluded (topic.properties.exclude), and not sensitive, whose
// values a cluster never returns. The metadata sync keeps them in step, and
// a destination topic is created with them.
func DynamicTopicConfigs(rc kadm.ResourceConfig, excluded func(name string) bool) map[string]string {
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil && !c.Sensitive && !excluded(c.Key) {
			out[c.Key] = *c.Value
		}
	}
	return out
}
