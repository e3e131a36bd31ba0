package schemaregistry

import "testing"

func TestDestinationSubject(t *testing.T) {
	sel := Selection{Topics: []string{"orders"}, TopicPrefix: "east."}
	inContext := sel
	inContext.Context = ".east"
	dot := sel
	dot.Context = "."
	for _, c := range []struct {
		sel    Selection
		source string
		want   string
	}{
		{sel, "orders-value", "east.orders-value"},
		{sel, "orders-key", "east.orders-key"},
		{sel, "orders-other", "orders-other"},     // not a TopicNameStrategy subject
		{sel, "payments-value", "payments-value"}, // not a selected topic
		{sel, "com.acme.Money", "com.acme.Money"}, // a shared type keeps its name
		{inContext, "orders-value", ":.east:east.orders-value"},
		{inContext, "com.acme.Money", ":.east:com.acme.Money"},
		{dot, "orders-value", "east.orders-value"}, // "." is the default context
	} {
		if got := c.sel.DestinationSubject(c.source); got != c.want {
			t.Errorf("%+v: %s -> %s, want %s", c.sel, c.source, got, c.want)
		}
	}
}
