package kafkaconn

import "github.com/twmb/franz-go/pkg/kadm"

// InternalTopicPrefix begins the names of kmirror's own topics on a
// destination: __mirror_state and __mirror_heartbeats.
const InternalTopicPrefix = "__mirror_"

// InternalTopicsACL is the DENY of WRITE and DELETE for User:* on every
// topic named with InternalTopicPrefix: only a super user (kmirror's
// principal, as the read-only ACLs of mirrored topics already need) may
// write or delete kmirror's own topics.
func InternalTopicsACL() *kadm.ACLBuilder {
	return kadm.NewACLs().Topics(InternalTopicPrefix).ResourcePatternType(kadm.ACLPatternPrefixed).
		Deny("User:*").DenyHosts("*").Operations(kadm.OpWrite, kadm.OpDelete)
}

// InternalTopicsACLCommand is InternalTopicsACL as Kafka's own tool writes it.
const InternalTopicsACLCommand = "kafka-acls.sh --bootstrap-server DESTINATION --add --deny-principal 'User:*' " +
	"--operation Write --operation Delete --topic " + InternalTopicPrefix + " --resource-pattern-type prefixed"
