package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestDeployFiles checks what the image and the compose file promise. No
// Docker engine runs here, so this reads them: the compose file as YAML
// (anchors and merge keys resolved), the Dockerfile as text.
func TestDeployFiles(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Profiles    []string          `yaml:"profiles"`
			Ports       []string          `yaml:"ports"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			Command     []string          `yaml:"command"`
			Restart     string            `yaml:"restart"`
			Healthcheck struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("kmirror:kmirror@")) || bytes.Contains(raw, []byte("POSTGRES_PASSWORD: kmirror")) {
		t.Error("docker-compose.yml hard-codes the database password")
	}
	if pw := compose.Services["postgres"].Environment["POSTGRES_PASSWORD"]; !strings.HasPrefix(pw, "${KMIRROR_DB_PASSWORD:?") {
		t.Errorf("postgres does not require KMIRROR_DB_PASSWORD: %q", pw)
	}
	// The one-shot service that writes the secret key, only when absent.
	keyWriter := compose.Services["secret-key"]
	writes := strings.Join(keyWriter.Command, " ")
	if !strings.Contains(writes, "kmirror secrets new-key") || !strings.Contains(writes, "test -s /var/lib/kmirror/secret.key ||") ||
		keyWriter.Restart != "no" || !slices.Contains(keyWriter.Volumes, "secret-key:/var/lib/kmirror") {
		t.Errorf("secret-key does not write a key once into its volume: %+v", keyWriter)
	}
	var kmirrors, kafkas int
	for name, s := range compose.Services {
		if len(s.Healthcheck.Test) == 0 && name != "secret-key" {
			t.Errorf("service %s has no health check", name)
		}
		switch {
		case strings.HasPrefix(name, "kmirror"):
			kmirrors++
			for _, p := range s.Ports {
				if !strings.HasPrefix(p, "127.0.0.1:") {
					t.Errorf("%s publishes %s beyond loopback", name, p)
				}
			}
			if tok := s.Environment["KMIRROR_API_TOKEN"]; !strings.Contains(tok, ":?") {
				t.Errorf("%s does not require KMIRROR_API_TOKEN: %q", name, tok)
			}
			if got := strings.Join(s.Healthcheck.Test, " "); got != "CMD /usr/local/bin/kmirror health --path /readyz" {
				t.Errorf("%s's health check is %q, want kmirror health on /readyz (ready: the database answers)", name, got)
			}
			if s.Environment["KMIRROR_INSTANCE_ID"] == "" || s.DependsOn["postgres"].Condition != "service_healthy" {
				t.Errorf("%s: %+v", name, s)
			}
			if url := s.Environment["KMIRROR_DATABASE_URL"]; !strings.Contains(url, ":${KMIRROR_DB_PASSWORD:?") {
				t.Errorf("%s does not take the database password from KMIRROR_DB_PASSWORD: %q", name, url)
			}
			if s.Environment["KMIRROR_SECRET_KEY_FILE"] != "/var/lib/kmirror/secret.key" ||
				!slices.Contains(s.Volumes, "secret-key:/var/lib/kmirror:ro") ||
				s.DependsOn["secret-key"].Condition != "service_completed_successfully" {
				t.Errorf("%s does not read the generated secret key: %+v", name, s)
			}
			if _, ok := s.Environment["KMIRROR_INSECURE_STORE_SECRETS_IN_CLEAR"]; ok {
				t.Errorf("%s stores source secrets in clear", name)
			}
		case strings.HasPrefix(name, "kafka"):
			kafkas++
			if !strings.HasPrefix(s.Image, "apache/kafka:") || len(s.Profiles) != 1 || s.Profiles[0] != "demo" ||
				!strings.Contains(s.Environment["KAFKA_PROCESS_ROLES"], "controller") {
				t.Errorf("%s is not a KRaft apache/kafka in profile demo: %+v", name, s)
			}
		}
	}
	if kmirrors != 2 || kafkas != 2 || compose.Services["postgres"].Image == "" {
		t.Errorf("%d kmirror and %d kafka services", kmirrors, kafkas)
	}

	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ENV KMIRROR_LISTEN=0.0.0.0:8080", "ca-certificates", `-X main.version=${VERSION}`,
		"HEALTHCHECK", `"/usr/local/bin/kmirror", "health"`, "USER kmirror",
		// The compose file's key volume is written by kmirror, not root.
		"install -d -o kmirror -g kmirror -m 700 /var/lib/kmirror"} {
		if !bytes.Contains(docker, []byte(want)) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil || !bytes.Contains(ignore, []byte(".git\n")) {
		t.Errorf(".dockerignore does not keep .git out of the build context (%v)", err)
	}
}

// TestHealthCommand: `kmirror health` asks the server named by
// KMIRROR_LISTEN (loopback for an address on every interface) and exits 0
// only on 200.
func TestHealthCommand(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("KMIRROR_TLS_CERT_FILE", "")
	t.Setenv("KMIRROR_LISTEN", "0.0.0.0:"+port)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"health"}, &out, &errOut); code != 0 {
		t.Fatalf("healthy: exit %d %s", code, errOut.String())
	}
	status = http.StatusServiceUnavailable
	if code := run(context.Background(), []string{"health"}, &out, &errOut); code != 1 {
		t.Fatalf("unhealthy: exit %d", code)
	}
}
