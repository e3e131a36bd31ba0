// Package api is kmirror's REST control plane: chi routes under /v1,
// problem+json errors, and the OpenAPI spec and docs page.
//
//	@title						kmirror API
//	@version					1.0
//	@description				Kafka cluster mirroring as a service: mirrors (a link from a source Kafka cluster into the destination cluster), mirror topics and their partitions, the unit of replication.
//	@description
//	@description				Bodies are JSON (send Content-Type: application/json, exactly; at most 1 MiB; no key twice in an object). Errors are application/problem+json with a stable `type` (urn:kmirror:problem:...) that clients may switch on.
//	@description				When the server has API tokens, every route but /healthz and /readyz needs an Authorization: Bearer token (/metrics and /docs too, unless the server makes them public): 401 without a valid one, 403 when the token's role is too low. Roles: viewer reads; operator also adds, pauses, resumes, removes and restarts topics and requests syncs; admin also creates, patches and deletes mirrors. Without tokens (kmirror dev on loopback) the API is open.
//	@description				Changes (every call but GET) are rate-limited per token, and so are open event streams: 429 with Retry-After.
//	@license.name				Proprietary
//	@host						127.0.0.1:8080
//	@BasePath					/
//	@schemes					http
//	@tag.name					mirrors
//	@tag.description			Mirrors: a named link from one source Kafka cluster into the destination cluster, with its connection, security and config.
//	@tag.name					topics
//	@tag.description			Mirror topics: add source topics to a mirror by pattern, pause, resume and remove (failover) them, and read their state.
//	@tag.name					partitions
//	@tag.description			Mirror partitions, the unit of replication: the describe rows (offsets, lag, state, errors, owner) and offset translation.
//	@tag.name					system
//	@tag.description			The kmirror instances, health, the caller's role, lag and throughput history, and the event stream.
//	@securityDefinitions.apikey	BearerAuth
//	@in							header
//	@name						Authorization
//	@description				A bearer token with a role (viewer, operator or admin): one of the server's tokens file (kmirror token new), or KMIRROR_API_TOKEN (admin) or KMIRROR_API_READ_TOKEN (viewer). Send "Authorization: Bearer <token>".
package api

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kmirror/service"
)

// Config wires the HTTP handler.
type Config struct {
	Service *service.Control
	// Pool is pinged by /readyz.
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Registry receives the HTTP metrics and is served on /metrics; nil
	// makes a fresh one.
	Registry *prometheus.Registry
	// OpenAPI is the OpenAPI document served at /openapi.json.
	OpenAPI []byte
	// Tokens, when set, protect every route but /healthz, /readyz and the
	// console's static files with bearer tokens.
	Tokens Tokens
	// PublicMetrics and PublicDocs serve /metrics, and /docs with
	// /openapi.json, without a token even when the server has tokens.
	PublicMetrics bool
	PublicDocs    bool
	// ChangeRate and ChangeBurst limit each caller's changes (every /v1
	// request but GET and HEAD): ChangeBurst at once, then ChangeRate per
	// second; defaults 5 and 20, a negative ChangeRate turns it off.
	ChangeRate  float64
	ChangeBurst int
	// MaxStreams caps the /v1/events streams one caller holds open at
	// once; default 8, negative for no cap.
	MaxStreams int
	// DescribeRate and DescribeBurst pace GET /v1/partitions for the whole
	// instance: DescribeBurst rows at once (at least the largest page),
	// then DescribeRate rows per second; a page waits its turn. Defaults
	// 20,000 and 10,000; a negative DescribeRate turns it off.
	DescribeRate  float64
	DescribeBurst int
	// EventKeepAlive is how often an idle event stream gets a comment
	// line; default 15s.
	EventKeepAlive time.Duration
	// Console, when set, is served at "/" and "/ui/*" (the web console).
	Console http.Handler
	// RequestTimeout bounds every /v1 request but the event stream;
	// default 35s (a sync-now request waits up to 30s for its pass). A topic
	// action's ?wait is added to it.
	RequestTimeout time.Duration
}

func (c *Config) validate() error {
	if c.Service == nil || c.Pool == nil {
		return errors.New("api: Service and Pool are required")
	}
	return c.Tokens.Validate()
}

type server struct {
	svc         *service.Control
	pool        *pgxpool.Pool
	authEnabled bool
	keepAlive   time.Duration
	// describe paces partition pages; nil when off.
	describe *describeBudget
}

// NewHandler returns the full HTTP handler.
func NewHandler(cfg Config) (http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cmp.Or(cfg.Logger, slog.Default())
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	metrics := newHTTPMetrics(reg)
	s := &server{svc: cfg.Service, pool: cfg.Pool, authEnabled: cfg.Tokens.Enabled(),
		keepAlive: cmp.Or(cfg.EventKeepAlive, 15*time.Second)}
	var changes *rateLimiter
	if cfg.ChangeRate >= 0 {
		changes = newRateLimiter(cmp.Or(cfg.ChangeRate, 5), cmp.Or(cfg.ChangeBurst, 20))
	}
	if cfg.DescribeRate >= 0 {
		waited := prometheus.NewCounter(prometheus.CounterOpts{Name: "kmirror_api_describe_wait_seconds_total",
			Help: "Time GET /v1/partitions pages waited for the instance's describe budget (--api-describe-rate)."})
		reg.MustRegister(waited)
		s.describe = newDescribeBudget(cmp.Or(cfg.DescribeRate, DefaultDescribeRate),
			max(cmp.Or(cfg.DescribeBurst, DefaultDescribeBurst), service.MaxPartitionPageLimit), waited)
	}
	var streams *streamLimiter
	if cfg.MaxStreams >= 0 {
		streams = &streamLimiter{max: cmp.Or(cfg.MaxStreams, 8), open: map[string]int{}}
	}
	auth := authenticate(cfg.Tokens)
	operator, admin := requireRole(RoleOperator), requireRole(RoleAdmin)

	r := chi.NewRouter()
	r.Use(withRequestID(log), metrics.logAndMeasure, recoverer, rejectBadText)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, kindNotFound, "no route for "+r.Method+" "+r.URL.Path, nil)
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, kindMethod, "method "+r.Method+" is not allowed on "+r.URL.Path, nil)
	})

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Group(func(r chi.Router) {
		if !cfg.PublicMetrics {
			r.Use(auth)
		}
		r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	})
	r.Group(func(r chi.Router) {
		if !cfg.PublicDocs {
			r.Use(auth)
		}
		mountDocs(r, cfg.OpenAPI)
	})
	// The console's files hold no data (a browser cannot send a bearer
	// token when it opens a page); it asks for a token and sends it to /v1.
	if cfg.Console != nil {
		r.Method(http.MethodGet, "/", cfg.Console)
		r.Method(http.MethodGet, "/ui/*", cfg.Console)
	}

	r.Route("/v1", func(r chi.Router) {
		r.Use(auth, limitChanges(changes), requestDeadline(cmp.Or(cfg.RequestTimeout, 35*time.Second)))
		r.With(admin).Post("/mirrors", s.createMirror)
		r.Get("/mirrors", s.listMirrors)
		r.Get("/mirrors/{mirror}", s.getMirror)
		r.With(admin).Patch("/mirrors/{mirror}", s.updateMirror)
		r.With(admin).Delete("/mirrors/{mirror}", s.deleteMirror)
		r.With(operator).Post("/mirrors/{mirror}:sync", s.syncMirror)
		r.With(operator).Post("/mirrors/{mirror}:check", s.checkMirror)
		r.With(operator).Post("/mirrors/{mirror}/topics:add", s.addTopics)
		r.With(operator).Post("/mirrors/{mirror}/topics:pause", s.pauseTopics)
		r.With(operator).Post("/mirrors/{mirror}/topics:resume", s.resumeTopics)
		r.With(operator).Post("/mirrors/{mirror}/topics:remove", s.removeTopics)
		r.Get("/mirrors/{mirror}/topics", s.listTopics)
		r.Get("/mirrors/{mirror}/topics/{topic}", s.getTopic)
		r.Get("/mirrors/{mirror}/topics/{topic}/partitions/{partition}/translate", s.translate)
		r.Get("/partitions", s.listPartitions)
		r.Get("/instances", s.listInstances)
		r.Get("/history", s.getHistory)
		r.With(limitStreams(streams)).Get("/events", s.streamEvents)
		r.Get("/whoami", s.whoami)
	})
	if err := metrics.learnRoutes(r); err != nil {
		return nil, err
	}
	return r, nil
}

// healthz godoc
//
//	@Summary		Liveness: the process is up
//	@Description	Answers 200 while the process serves HTTP, whether or not the database answers (see /readyz). Needs no token.
//	@ID				healthz
//	@Tags			system
//	@Produce		json
//	@Success		200	{object}	Health
//	@Failure		500	{object}	Problem	"internal"
//	@Router			/healthz [get]
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Health{Status: "ok"})
}

// readyz godoc
//
//	@Summary		Readiness: the database answers
//	@Description	200 when PostgreSQL answers a ping within 2s as a primary (not a read-only standby), else 503 database-unavailable with Retry-After and no detail of the database (the server log has it). Needs no token. Only PostgreSQL counts: a Kafka cluster that cannot be reached shows in each mirror's status and in kmirror_cluster_reachable, not here, so that a cluster outage does not take every instance out of service.
//	@ID				readyz
//	@Tags			system
//	@Produce		json
//	@Success		200	{object}	Health
//	@Failure		500	{object}	Problem	"internal"
//	@Failure		503	{object}	Problem	"database-unavailable: PostgreSQL did not answer (with Retry-After)"
//	@Router			/readyz [get]
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := service.DatabaseWritable(ctx, s.pool); err != nil {
		// The error names the database's user, name and address, and
		// /readyz answers anyone: the detail goes to the log only.
		logger(ctx).WarnContext(ctx, "readiness: the database did not answer, or only as a read-only standby",
			"timeout", readyTimeout, slog.Any("err", err))
		w.Header().Set("Retry-After", readyRetryAfter)
		writeProblem(w, r, kindDatabaseDown, "database unavailable", nil)
		return
	}
	writeJSON(w, http.StatusOK, Health{Status: "ready"})
}
