package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/sr"
)

// SetMode sets mode on each of the given destination subjects (names as
// Selection.DestinationSubject gives them). The lifecycle uses READONLY
// while a topic is mirrored and READWRITE after its failover; Apply uses
// IMPORT while it writes. IMPORT is forced, since a registry refuses it on
// a subject that holds versions otherwise. It never touches the registry's
// global mode: an empty list sets nothing, and an empty name is refused.
func SetMode(ctx context.Context, cl *sr.Client, subjects []string, mode sr.Mode) error {
	if mode.String() == "" {
		return fmt.Errorf("set mode: unknown mode %d", mode)
	}
	if len(subjects) == 0 {
		// sr.Client.SetMode with no subject sets the global mode.
		return nil
	}
	if slices.Contains(subjects, "") {
		return errors.New("set mode: an empty subject name would set the registry's global mode")
	}
	if mode == sr.ModeImport {
		ctx = sr.WithParams(ctx, sr.Force)
	}
	var errs []error
	for _, res := range cl.SetMode(ctx, mode, subjects...) {
		if res.Err != nil {
			errs = append(errs, fmt.Errorf("setting %s mode on %q: %w", mode, res.Subject, res.Err))
		}
	}
	return errors.Join(errs...)
}
