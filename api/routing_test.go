package api_test

import (
	"net/http"
	"slices"
	"testing"

	"kmirror/api"
)

// TestRoutingWithDottedNames checks that the ":action" routes and the
// {mirror} and {topic} parameters work with every character a name may have.
func TestRoutingWithDottedNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "my.mirror-1"
	r := e.do(t, "POST", "/v1/mirrors", map[string]any{"name": name, "source": map[string]any{"bootstrap_servers": e.bootstrap}})
	ok(t, r, http.StatusCreated, nil)
	if loc := r.header.Get("Location"); loc != "/v1/mirrors/"+name {
		t.Fatalf("Location %q", loc)
	}
	var m api.Mirror
	ok(t, e.do(t, "GET", "/v1/mirrors/"+name, nil), http.StatusOK, &m)
	if m.Name != name {
		t.Fatalf("GET returned %q", m.Name)
	}
	for _, action := range []string{"add", "pause", "resume", "remove", "add"} {
		if res := e.topicsAction(t, name, action, "orders"); !slices.Equal(res.Topics, []string{"orders"}) {
			t.Fatalf("%s: topics %v", action, res.Topics)
		}
	}
	var topics api.TopicList
	ok(t, e.do(t, "GET", "/v1/mirrors/"+name+"/topics", nil), http.StatusOK, &topics)
	if len(topics.Topics) != 1 || topics.Topics[0].Mirror != name || topics.Topics[0].DesiredState != "mirroring" {
		t.Fatalf("topics %+v", topics)
	}
	var detail api.TopicDetail
	ok(t, e.do(t, "GET", "/v1/mirrors/"+name+"/topics/orders", nil), http.StatusOK, &detail)
	if detail.Mirror != name || detail.Topic.Topic != "orders" {
		t.Fatalf("topic detail %+v", detail)
	}
	wantProblem(t, e.do(t, "GET", "/v1/mirrors/"+name+"/topics/orders/partitions/0/translate?source_offset=0", nil),
		http.StatusNotFound, "not-found", "nothing of orders/0 has been mirrored")
	var parts api.PartitionList
	ok(t, e.do(t, "GET", "/v1/partitions?mirror="+name, nil), http.StatusOK, &parts)
	if len(parts.Partitions) != 3 {
		t.Fatalf("partitions %+v", parts)
	}
	// A mirror whose name ends like an action is still just a name.
	ok(t, e.do(t, "POST", "/v1/mirrors", map[string]any{"name": "topics.add", "source": map[string]any{"bootstrap_servers": e.bootstrap}}),
		http.StatusCreated, nil)
	ok(t, e.do(t, "GET", "/v1/mirrors/topics.add", nil), http.StatusOK, &m)
	if m.Name != "topics.add" {
		t.Fatalf("GET returned %q", m.Name)
	}
	e.topicsAction(t, "topics.add", "add", "payments")

	e.topicsAction(t, name, "remove", "orders")
	ok(t, e.do(t, "DELETE", "/v1/mirrors/"+name, nil), http.StatusNoContent, nil)
	wantProblem(t, e.do(t, "GET", "/v1/mirrors/"+name, nil), http.StatusNotFound, "not-found", "mirror "+name+" does not exist")
}
