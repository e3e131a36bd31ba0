package mirrorsfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Secret says where a write-only source secret is read from, when it has
// to be sent: an environment variable or a file, never the file itself.
type Secret struct {
	Env  string `yaml:"env,omitempty"`
	File string `yaml:"file,omitempty"`
}

// UnmarshalYAML refuses a plain value; Parse has already named the field.
func (s *Secret) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a secret is {env: NAME} or {file: PATH}, never its value", n.Line)
	}
	type plain Secret
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*s = Secret(p)
	if (s.Env == "") == (s.File == "") {
		return fmt.Errorf("line %d: a secret is {env: NAME} or {file: PATH}: give exactly one", n.Line)
	}
	return nil
}

// String says where the secret comes from, never what it is.
func (s *Secret) String() string {
	if s.Env != "" {
		return "env " + s.Env
	}
	return "file " + s.File
}

// resolve reads the secret. A file's trailing newline is not part of a
// password; a PEM key keeps it.
func (s *Secret) resolve(dir, field string) (string, error) {
	if s.Env != "" {
		v := os.Getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("%s: environment variable %s is empty or unset", field, s.Env)
		}
		return v, nil
	}
	b, err := os.ReadFile(resolvePath(dir, s.File))
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	v := string(b)
	if !strings.HasSuffix(field, "_pem") {
		v = strings.TrimRight(v, "\r\n")
	}
	if v == "" {
		return "", fmt.Errorf("%s: file %s is empty", field, s.File)
	}
	return v, nil
}

// Text is a non-secret value given inline or read from {file: PATH}: a
// CA or client certificate.
type Text struct {
	Value string
	File  string
}

func (t *Text) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		t.Value = n.Value
		return nil
	}
	var ref struct {
		File string `yaml:"file"`
	}
	if err := n.Decode(&ref); err != nil || ref.File == "" {
		return fmt.Errorf("line %d: give the PEM inline or as {file: PATH}", n.Line)
	}
	t.File = ref.File
	return nil
}

func (t Text) MarshalYAML() (any, error) {
	if t.File != "" {
		return map[string]string{"file": t.File}, nil
	}
	return t.Value, nil
}

func (t *Text) resolve(dir, field string) (string, error) {
	if t.File == "" {
		return t.Value, nil
	}
	b, err := os.ReadFile(resolvePath(dir, t.File))
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return string(b), nil
}

func resolvePath(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// sourceSecrets and registrySecrets are the API's write-only fields.
var (
	sourceSecrets   = []string{"sasl_password", "tls_key_pem", "aws_secret_access_key", "aws_session_token", "sasl_oauthbearer_client_secret"}
	registrySecrets = []string{"basic_auth_password", "bearer_token", "tls_key_pem"}
)

// checkSecretNodes refuses a secret field whose value is not a mapping,
// naming the mirror and the field, and never the value.
func checkSecretNodes(root *yaml.Node) error {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	mirrors := mapValue(doc, "mirrors")
	if mirrors == nil || mirrors.Kind != yaml.SequenceNode {
		return nil
	}
	var errs []error
	for i, m := range mirrors.Content {
		where := fmt.Sprintf("mirrors[%d]", i)
		if name := mapValue(m, "name"); name != nil && name.Kind == yaml.ScalarNode {
			where += " (" + name.Value + ")"
		}
		src := mapValue(m, "source")
		errs = append(errs, plainSecrets(src, where+": source.", sourceSecrets)...)
		errs = append(errs, plainSecrets(mapValue(src, "schema_registry"), where+": source.schema_registry.", registrySecrets)...)
	}
	return errors.Join(errs...)
}

func plainSecrets(m *yaml.Node, prefix string, fields []string) []error {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	var errs []error
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if slices.Contains(fields, k.Value) && v.Kind != yaml.MappingNode {
			errs = append(errs, fmt.Errorf("%s%s (line %d): a secret is never written in the file; give {env: NAME} or {file: PATH}",
				prefix, k.Value, k.Line))
		}
	}
	return errs
}

// mapValue is the value of key in a mapping node, nil when absent.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
