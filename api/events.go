package api

import (
	"cmp"
	"encoding/json"
	"time"

	"kmirror/service"
)

// Event is an event of any kind, as the data of a /v1/events message: one
// of the shapes below, told apart by kind. Swagger 2.0 has no oneOf, so the
// spec lists the shapes as this struct's fields, each marked x-one-of=kind,
// and openapiconv turns Event into a oneOf of them with a discriminator on
// kind (the mapping comes from each shape's kind enum). The server never
// sends an Event as such: eventView picks the shape.
type Event struct {
	PartitionState     PartitionStateEvent     `json:"partition_state" extensions:"x-one-of=kind"`
	PartitionOwner     PartitionOwnerEvent     `json:"partition_owner" extensions:"x-one-of=kind"`
	PartitionRealigned PartitionRealignedEvent `json:"partition_realigned" extensions:"x-one-of=kind"`
	Plain              PlainEvent              `json:"plain" extensions:"x-one-of=kind"`
} // @name Event

// eventHeader is what every event has besides its kind and data.
type eventHeader struct {
	// ID orders the events; the stream's id, for Last-Event-ID.
	ID int64     `json:"id" example:"42"`
	At time.Time `json:"at" format:"date-time" example:"2026-01-02T15:04:05Z"`
	// Mirror, Topic and Partition are absent for events without one.
	Mirror string `json:"mirror,omitempty" example:"m1"`
	// Topic is the source topic.
	Topic string `json:"topic,omitempty" example:"orders"`
	// DestinationTopic, with topic, is the topic it is written to on the
	// destination (the mirror's topic.name.prefix and topic), as it was
	// named when the event was recorded.
	DestinationTopic string `json:"destination_topic,omitempty" example:"east.orders"`
	Partition        *int32 `json:"partition,omitempty" example:"0"`
	// Message says what happened, in words.
	Message string `json:"message" example:"added topics orders, payments"`
	// Actor is the name of the API token that made the change
	// ("anonymous" on a server without tokens); absent for what kmirror's
	// workers did on their own.
	Actor string `json:"actor,omitempty" example:"ci"`
	// RemoteAddr is the address the change came from.
	RemoteAddr string `json:"remote_addr,omitempty" example:"10.0.0.7"`
	// RequestID is the change's API request id (X-Request-Id, and the
	// request_id of the server's log line).
	RequestID string `json:"request_id,omitempty" example:"4bf92f3577b34da6"`
	// MirrorIncarnation is the incarnation of the mirror the event is about
	// (the mirror's incarnation), which tells it from an earlier, deleted
	// mirror of the same name; absent for events without a mirror, and for
	// those recorded before incarnations were.
	MirrorIncarnation int64 `json:"mirror_incarnation,omitempty" example:"7"`
}

// PartitionStateEvent is a partition state change.
type PartitionStateEvent struct {
	eventHeader
	Kind string             `json:"kind" enums:"partition.state" example:"partition.state"`
	Data PartitionStateData `json:"data"`
} // @name PartitionStateEvent

// PartitionStateData is a partition.state event's details.
type PartitionStateData struct {
	Mirror string `json:"mirror" example:"m1"`
	Topic  string `json:"topic" example:"orders"`
	// DestinationTopic is the topic's destination name.
	DestinationTopic string `json:"destination_topic" example:"east.orders"`
	Partition        int32  `json:"partition" example:"0"`
	// From is the state left; UNKNOWN for a partition that had none.
	From PartitionState `json:"from" example:"PREPARING"`
	// To is the state entered.
	To PartitionState `json:"to" example:"MIRRORING"`
	// Reason says why the state changed; null when not known.
	Reason *string `json:"reason" extensions:"x-nullable" example:"aligned"`
	// Error is the FAILED cause when To is FAILED; null otherwise.
	Error *string `json:"error" extensions:"x-nullable" example:"destination unreachable"`
	// Epoch is the epoch of the partition lease that made the change: it
	// grows with each new owner.
	Epoch int64 `json:"epoch" example:"3"`
	// Owner is the instance that held the partition's lease; null when
	// none did.
	Owner *string `json:"owner" extensions:"x-nullable" example:"kmirror-0-4211"`
	// LastMirroredSourceOffset is, when To is STOPPED, the source offset of
	// the last record copied; null otherwise, or when nothing was copied.
	LastMirroredSourceOffset *int64 `json:"last_mirrored_source_offset" extensions:"x-nullable" example:"1234"`
	// LastMirroredDestinationOffset is the destination offset of that
	// record; null with LastMirroredSourceOffset.
	LastMirroredDestinationOffset *int64 `json:"last_mirrored_destination_offset" extensions:"x-nullable" example:"1230"`
} // @name PartitionStateData

// PartitionOwnerEvent is a new owner taking over a partition that its
// previous owner left in flight, and re-aligning it: no state change.
type PartitionOwnerEvent struct {
	eventHeader
	Kind string             `json:"kind" enums:"partition.owner" example:"partition.owner"`
	Data PartitionOwnerData `json:"data"`
} // @name PartitionOwnerEvent

// PartitionOwnerData is a partition.owner event's details.
type PartitionOwnerData struct {
	Mirror string `json:"mirror" example:"m1"`
	Topic  string `json:"topic" example:"orders"`
	// DestinationTopic is the topic's destination name.
	DestinationTopic string `json:"destination_topic" example:"east.orders"`
	Partition        int32  `json:"partition" example:"0"`
	// State is the state kept.
	State PartitionState `json:"state" example:"MIRRORING"`
	// Epoch is the new lease's epoch.
	Epoch int64 `json:"epoch" example:"4"`
	// Owner is the new owner; null when no instance holds the lease.
	Owner *string `json:"owner" extensions:"x-nullable" example:"kmirror-0-4211"`
	// PreviousOwner is the instance that held it before; null when not
	// known.
	PreviousOwner *string `json:"previous_owner" extensions:"x-nullable" example:"kmirror-1-3877"`
} // @name PartitionOwnerData

// PartitionRealignedEvent is a partition re-aligning in place (the source
// dropped records before they were mirrored): no state change.
type PartitionRealignedEvent struct {
	eventHeader
	Kind string                 `json:"kind" enums:"partition.realigned" example:"partition.realigned"`
	Data PartitionRealignedData `json:"data"`
} // @name PartitionRealignedEvent

// PartitionRealignedData is a partition.realigned event's details.
type PartitionRealignedData struct {
	Mirror string `json:"mirror" example:"m1"`
	Topic  string `json:"topic" example:"orders"`
	// DestinationTopic is the topic's destination name.
	DestinationTopic string `json:"destination_topic" example:"east.orders"`
	Partition        int32  `json:"partition" example:"0"`
	// State is the state kept.
	State PartitionState `json:"state" example:"MIRRORING"`
	// Cause says why the partition re-aligned.
	Cause string `json:"cause" example:"records removed by retention"`
	Epoch int64  `json:"epoch" example:"3"`
	// Owner is the lease holder that re-aligned it; null when none.
	Owner *string `json:"owner" extensions:"x-nullable" example:"kmirror-0-4211"`
} // @name PartitionRealignedData

// PlainEvent is an event of any other kind: an operator action, a metadata
// sync change or a restore. Its message says it all; it has no data.
type PlainEvent struct {
	eventHeader
	Kind string `json:"kind" enums:"mirror.created,mirror.updated,mirror.deleted,mirror.sync_requested,topics.added,topics.paused,topics.resumed,topics.removed,topics.auto_added,topics.source_deleted,topic.partitions_added,state.restored,schemas.copied,schemas.sync_failed,schemas.sync_recovered,schemas.writable" example:"topics.added"`
} // @name PlainEvent

// eventView gives an event the shape of its kind. A partition event whose
// stored data does not parse is sent with the data it could read.
func eventView(e service.Event) any {
	h := eventHeader{ID: e.ID, At: e.At, Mirror: e.Mirror, Topic: e.Topic, DestinationTopic: e.DestinationTopic,
		Partition: e.Partition, Message: e.Message, Actor: e.Actor, RemoteAddr: e.RemoteAddr, RequestID: e.RequestID,
		MirrorIncarnation: e.Incarnation}
	var d service.PartitionEventData
	if len(e.Data) > 0 { // only partition events carry data
		_ = json.Unmarshal(e.Data, &d)
	}
	// The destination name is the row's, which a trigger fills when the
	// event is recorded; the data (written by the data plane) names the
	// source topic only.
	dest := cmp.Or(e.DestinationTopic, d.Topic)
	switch e.Kind {
	case service.EventPartitionState:
		data := PartitionStateData{
			Mirror: d.Mirror, Topic: d.Topic, DestinationTopic: dest, Partition: d.Partition,
			From: PartitionState(d.From), To: PartitionState(d.To), Reason: nonEmpty(d.Reason),
			Error: nonEmpty(d.Error), Epoch: d.Epoch, Owner: nonEmpty(d.Owner)}
		if l := d.LastMirrored; l != nil {
			data.LastMirroredSourceOffset, data.LastMirroredDestinationOffset = &l.SourceOffset, &l.DestinationOffset
		}
		return PartitionStateEvent{eventHeader: h, Kind: e.Kind, Data: data}
	case service.EventPartitionOwner:
		return PartitionOwnerEvent{eventHeader: h, Kind: e.Kind, Data: PartitionOwnerData{
			Mirror: d.Mirror, Topic: d.Topic, DestinationTopic: dest, Partition: d.Partition, State: PartitionState(d.State),
			Epoch: d.Epoch, Owner: nonEmpty(d.Owner), PreviousOwner: nonEmpty(d.PreviousOwner)}}
	case service.EventPartitionRealigned:
		return PartitionRealignedEvent{eventHeader: h, Kind: e.Kind, Data: PartitionRealignedData{
			Mirror: d.Mirror, Topic: d.Topic, DestinationTopic: dest, Partition: d.Partition, State: PartitionState(d.State),
			Cause: d.Cause, Epoch: d.Epoch, Owner: nonEmpty(d.Owner)}}
	default:
		return PlainEvent{eventHeader: h, Kind: e.Kind}
	}
}

// nonEmpty is nil for "", so an absent value is sent as null.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
