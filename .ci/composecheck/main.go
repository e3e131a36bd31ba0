// Command composecheck loads docker-compose.yml with compose-go, the loader
// `docker compose config` uses (schema validation, interpolation, profiles,
// merge keys), as .ci/run's check where no Docker engine runs. It is its own
// module so the loader's dependencies stay out of kmirror's.
//
//	go run . ../../docker-compose.yml
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

func load(file string, env, profiles []string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{file}, cli.WithEnv(env), cli.WithProfiles(profiles), cli.WithName("kmirror"))
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: composecheck docker-compose.yml")
		os.Exit(2)
	}
	file := os.Args[1]
	var problems []string
	// The values the required variables get here; none may appear in the
	// file itself.
	const dbPassword = "db-password-from-env"
	env := []string{"KMIRROR_API_TOKEN=check", "KMIRROR_DB_PASSWORD=" + dbPassword}
	for _, profiles := range [][]string{nil, {"demo"}} {
		p, err := load(file, env, profiles)
		if err != nil {
			problems = append(problems, fmt.Sprintf("profiles %v: %v", profiles, err))
			continue
		}
		names := p.ServiceNames()
		slices.Sort(names)
		fmt.Printf("profiles %v: services %s\n", profiles, strings.Join(names, ", "))
		problems = append(problems, checkSecrets(p, dbPassword)...)
		for _, name := range names {
			s := p.Services[name]
			if (s.HealthCheck == nil || len(s.HealthCheck.Test) == 0) && !oneShot(p, name) {
				problems = append(problems, name+": no health check")
			}
			for _, port := range s.Ports {
				if port.HostIP != "127.0.0.1" {
					problems = append(problems, fmt.Sprintf("%s: port %s published beyond loopback", name, port.Published))
				}
			}
		}
	}
	// The token and the database password are required: without either
	// the file does not load.
	for _, v := range []string{"KMIRROR_API_TOKEN", "KMIRROR_DB_PASSWORD"} {
		var without []string
		for _, kv := range env {
			if !strings.HasPrefix(kv, v+"=") {
				without = append(without, kv)
			}
		}
		if _, err := load(file, without, nil); err == nil || !strings.Contains(err.Error(), v) {
			problems = append(problems, fmt.Sprintf("loads without %s (%v)", v, err))
		}
	}
	if len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "composecheck:\n  "+strings.Join(problems, "\n  "))
		os.Exit(1)
	}
	fmt.Println("composecheck: ok")
}

// oneShot says whether a service runs once and exits (restart "no"), with
// every dependant waiting for it to complete: a health check means nothing
// for it.
func oneShot(p *types.Project, name string) bool {
	if p.Services[name].Restart != "no" {
		return false
	}
	waited := false
	for _, s := range p.Services {
		if d, ok := s.DependsOn[name]; ok {
			if d.Condition != types.ServiceConditionCompletedSuccessfully {
				return false
			}
			waited = true
		}
	}
	return waited
}

// checkSecrets: every kmirror server reads its secret key from a volume
// that a one-shot service fills before it starts, and the database password
// comes from the environment, in PostgreSQL and in the servers' URL alike.
func checkSecrets(p *types.Project, dbPassword string) []string {
	var problems []string
	if pw := p.Services["postgres"].Environment["POSTGRES_PASSWORD"]; pw == nil || *pw != dbPassword {
		problems = append(problems, "postgres: POSTGRES_PASSWORD does not come from KMIRROR_DB_PASSWORD")
	}
	servers := 0
	for name, s := range p.Services {
		if !slices.Contains(s.Command, "server") {
			continue
		}
		servers++
		if u := s.Environment["KMIRROR_DATABASE_URL"]; u == nil || !strings.Contains(*u, ":"+dbPassword+"@") {
			problems = append(problems, name+": KMIRROR_DATABASE_URL does not take its password from KMIRROR_DB_PASSWORD")
		}
		keyFile := s.Environment["KMIRROR_SECRET_KEY_FILE"]
		if keyFile == nil || *keyFile == "" {
			problems = append(problems, name+": no KMIRROR_SECRET_KEY_FILE: it would refuse source secrets")
			continue
		}
		if s.Environment["KMIRROR_INSECURE_STORE_SECRETS_IN_CLEAR"] != nil {
			problems = append(problems, name+": stores source secrets in clear")
		}
		var vol *types.ServiceVolumeConfig
		for i, v := range s.Volumes {
			if v.Type == types.VolumeTypeVolume && strings.HasPrefix(*keyFile, strings.TrimSuffix(v.Target, "/")+"/") {
				vol = &s.Volumes[i]
			}
		}
		if vol == nil {
			problems = append(problems, fmt.Sprintf("%s: its key file %s is on no named volume", name, *keyFile))
			continue
		}
		// The service that writes the key: it mounts the same volume
		// writable, and this server waits for it to complete.
		writer := ""
		for dep, d := range s.DependsOn {
			if d.Condition != types.ServiceConditionCompletedSuccessfully {
				continue
			}
			for _, v := range p.Services[dep].Volumes {
				if v.Source == vol.Source && !v.ReadOnly && strings.Contains(strings.Join(p.Services[dep].Command, " "), "secrets new-key") {
					writer = dep
				}
			}
		}
		if writer == "" {
			problems = append(problems, fmt.Sprintf("%s: no service it waits for (service_completed_successfully) writes its key into volume %s with kmirror secrets new-key", name, vol.Source))
		} else if !oneShot(p, writer) {
			problems = append(problems, writer+": the key writer must run once (restart: \"no\")")
		}
	}
	if servers == 0 {
		problems = append(problems, "no kmirror server service")
	}
	return problems
}
