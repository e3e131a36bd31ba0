package main

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/sr"

	"kmirror/internal/devenv/devregistry"
)

// devRegistries are kmirror dev's two in-memory Schema Registries: the demo
// mirror's source registry, holding the demo topics' value schemas, and the
// deployment's destination registry, into which the mirror copies them.
type devRegistries struct {
	source, destination *devregistry.Registry
}

// demoSchemas are the demo topics' Avro value schemas, registered in the
// source registry in this order: orders-value has two versions, so the
// copy shows versions and ids kept.
var demoSchemas = []struct{ subject, schema string }{
	{"orders-value", `{"type":"record","name":"Order","namespace":"demo","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`},
	{"payments-value", `{"type":"record","name":"Payment","namespace":"demo","fields":[{"name":"order_id","type":"string"},{"name":"amount","type":"long"}]}`},
	{"orders-value", `{"type":"record","name":"Order","namespace":"demo","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"currency","type":"string","default":"EUR"}]}`},
}

// startDevRegistries starts both registries on 127.0.0.1 (port 0 picks a
// free one) and registers the demo schemas in the source.
func startDevRegistries(sourcePort, destinationPort int) (*devRegistries, error) {
	src, err := devregistry.Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(sourcePort)))
	if err != nil {
		return nil, fmt.Errorf("start the source Schema Registry (is port %d free?): %w", sourcePort, err)
	}
	dst, err := devregistry.Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(destinationPort)))
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("start the destination Schema Registry (is port %d free?): %w", destinationPort, err)
	}
	r := &devRegistries{source: src, destination: dst}
	for _, s := range demoSchemas {
		if _, _, err := src.Context("").RegisterSchema(s.subject, sr.Schema{Schema: s.schema, Type: sr.TypeAvro}); err != nil {
			r.Close()
			return nil, fmt.Errorf("register the demo schema of %s: %w", s.subject, err)
		}
	}
	return r, nil
}

func (r *devRegistries) Close() {
	r.source.Close()
	r.destination.Close()
}
