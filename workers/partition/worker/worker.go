package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"kmirror/internal/kafka/batchproduce"
	"kmirror/internal/kafka/recordbatch"
	"kmirror/internal/runtime/startstop"
	"kmirror/internal/runtime/testsignal"
	"kmirror/internal/vocabulary/states"
	"kmirror/repo"
	"kmirror/service"
	"kmirror/workers/lease"
	"kmirror/workers/partition/metrics"
)

// RetryPolicy is the FAILED → PREPARING backoff: full jitter, exponential.
type RetryPolicy struct {
	Initial     time.Duration // default 1s
	Max         time.Duration // default 300s
	MaxAttempts int           // default 100
}

// StepPoint is where a worker is about to take a step: its partition and
// the state it is in.
type StepPoint struct {
	Key   lease.Key
	State states.Partition
}

// Config is what a worker is given besides its Ports: the engine's
// settings, with their defaults filled in, and the machinery of the
// instance that it uses as it is.
type Config struct {
	Retry RetryPolicy
	// DeliveryTimeout bounds how long a produced record may still land.
	DeliveryTimeout time.Duration
	// SettledWaitMax is how long copies of an ended session may go
	// unanswered before the engine writes them off.
	SettledWaitMax time.Duration
	// StopBudget, when set, bounds a session's wait for its copies by the
	// instance's shutdown budget.
	StopBudget *startstop.Budget
	Logger     *slog.Logger
	// BeforeStep, when set, is raised before each step, in the worker's
	// goroutine (a panic in its hook is the worker's). Tests wait for it
	// or inject faults there.
	BeforeStep *testsignal.Signal[StepPoint]

	// Gate bounds the records produced and not yet answered, across every
	// partition; a session takes room for each batch before producing it.
	Gate *batchproduce.Gate
	// Metrics counts verified copies; nil counts nothing.
	Metrics *metrics.Metrics
	// Codecs re-encodes the fetched batches that cannot be produced whole
	// (batch_copy.go), shared by the instance's sessions.
	Codecs *recordbatch.Codecs
}

// Worker owns one leased mirror partition: it moves the partition's actual
// state toward its topic's desired state in valid steps, aligning in
// PREPARING and copying records in MIRRORING.
type Worker struct {
	cfg   Config
	p     Ports
	lease Held
	key   lease.Key
	// dest is the topic's name on the destination, taken from the first
	// desire read (every step reads one before it acts): a topic row's
	// destination name never changes. key.Topic, the source name, stays
	// the partition's identity everywhere else.
	dest string
	log  *slog.Logger

	// row is the partition as last written by this worker.
	row repo.Partition
	// awaitingRecreate is set while partition 0's worker recreates the
	// destination topic; the checkpoint is re-read afterwards.
	awaitingRecreate bool
	// inOutage is set while steps fail for want of the database, which
	// is said once (outage).
	inOutage bool

	// inSlot is set while the worker holds a prepare slot, so its
	// alignment's record reads do not wait for a second one (readSlot).
	inSlot bool
	// leaseCtx ends only with the lease; mirroring runs under it.
	leaseCtx context.Context
	// desiredChanged is the desired-state cache's change signal, taken
	// before the desired state the worker acts on was read: a change after
	// that read has closed it, however busy the worker was when it came.
	// Taken afresh at each wait, it would miss a change that came in
	// between until the next one (or the session's 30 s tick).
	desiredChanged <-chan struct{}

	stopOnce sync.Once
	stopping chan struct{} // closed by Stop(): finish gracefully
	exited   chan struct{}
}

// Held is the lease a worker runs under, as the worker uses it: who holds
// it at which epoch (every write carries both), whom it was taken from, and
// whether it may still be acted on.
type Held struct {
	Key   lease.Key
	Owner string
	Epoch int64
	// Previous is the owner it was taken from ("" none or unknown).
	Previous string
	// Valid says whether the worker may still act on the lease.
	Valid func() bool
}

// HeldLease is l as its worker holds it.
func HeldLease(l *lease.Lease) Held {
	return Held{Key: l.Key, Owner: l.Owner, Epoch: l.Epoch, Previous: l.Previous, Valid: l.Valid}
}

// New returns the worker of a newly leased partition; Run runs it.
func New(cfg Config, p Ports, l Held) *Worker {
	return &Worker{cfg: cfg, p: p, lease: l, key: l.Key,
		log:      cfg.Logger.With("mirror", l.Key.Mirror, "topic", l.Key.Topic, "partition", l.Key.Partition, "epoch", l.Epoch),
		stopping: make(chan struct{}), exited: make(chan struct{})}
}

// fence is what the worker's writes carry so that they change nothing once
// its lease has moved on.
func (w *Worker) fence() repo.LeaseFence {
	return repo.LeaseFence{Mirror: w.key.Mirror, Topic: w.key.Topic, Partition: w.key.Partition,
		Owner: w.lease.Owner, Epoch: w.lease.Epoch}
}

// id is the partition's row id.
func (w *Worker) id() repo.PartitionID {
	return repo.PartitionID{Mirror: w.key.Mirror, Topic: w.key.Topic, Partition: w.key.Partition}
}

// Stop asks the worker to finish (flushing and saving its checkpoint) and
// waits until it has.
func (w *Worker) Stop() {
	w.stopOnce.Do(func() { close(w.stopping) })
	<-w.exited
}

// errStop ends the loop without a state change.
var errStop = errors.New("worker stopping")

// failure is a reason to enter FAILED.
type failure struct {
	msg       string
	retryable bool
	// outage is the database error among a retryable failure's causes:
	// then it is no failure of the partition (Worker.outage).
	outage error
}

func (f *failure) Error() string { return f.msg }

func (f *failure) Unwrap() error { return f.outage }

func retryable(format string, args ...any) error {
	f := &failure{msg: fmt.Sprintf(format, args...), retryable: true}
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, service.ErrDatabaseUnavailable) {
			f.outage = err
		}
	}
	return f
}

func permanent(format string, args ...any) error {
	return &failure{msg: fmt.Sprintf(format, args...)}
}

// Run runs the worker until its lease ends or it is stopped; leaseCtx
// ends with the lease.
func (w *Worker) Run(leaseCtx context.Context) {
	defer close(w.exited)
	defer w.p.Checkpoints.Drop(w.key) // leftovers of a lost lease must not be saved later
	// ctx also ends when the worker is asked to stop, so a stop never waits
	// on an alignment, a recreate or a slow source. Only mirroring keeps
	// leaseCtx: it settles its in-flight records itself when stopping.
	ctx, cancel := context.WithCancelCause(leaseCtx)
	defer cancel(nil)
	go func() {
		select {
		case <-w.stopping:
			cancel(errStop)
		case <-ctx.Done():
		}
	}()
	w.leaseCtx = leaseCtx
	if !w.start(ctx) {
		return
	}
	for {
		if !w.lease.Valid() {
			return
		}
		select {
		case <-w.stopping:
			return
		case <-ctx.Done():
			return
		default:
		}
		err := w.safeStep(ctx)
		if w.outage(ctx, err) {
			continue
		}
		w.inOutage = false
		if !w.handle(ctx, err) {
			return
		}
	}
}

// outagePause is how long a worker waits before it tries a step again
// that the database did not answer.
const outagePause = time.Second

// outage says whether err is the database not answering (an outage, a
// failover) rather than a fault of the partition, and then waits a pause
// before the step is tried again: no FAILED (whose write would not reach
// the database either) and no alarm. The lease's trust deadline decides
// how long the worker goes on without the database.
func (w *Worker) outage(ctx context.Context, err error) bool {
	if err == nil || !errors.Is(err, service.ErrDatabaseUnavailable) || ctx.Err() != nil {
		return false
	}
	if !w.inOutage {
		// Once per outage: at 10,000 partitions a line per retry would
		// flood the log.
		w.log.Warn("the database does not answer; trying again every second", "err", err)
		w.inOutage = true
	}
	select {
	case <-ctx.Done():
	case <-time.After(outagePause):
	}
	return true
}

// start loads the partition and, where another owner left it in flight,
// re-aligns it, in one of the engine's takeover slots. False ends the
// worker.
func (w *Worker) start(ctx context.Context) bool {
	// Before a slot: a partition waiting on a stalled destination must not
	// hold one that others could use.
	if err := w.p.Watch.AwaitSettled(ctx, w.key, nil); err != nil {
		w.log.Warn("an earlier session's copies are unanswered; giving the lease time to move on", "err", err)
		return false
	}
	release, err := w.p.TakeOver.Acquire(ctx)
	defer release()
	if err != nil {
		return false
	}
	var row repo.Partition
	for {
		row, err = w.p.Rows.Row(w.id())
		if err == nil {
			break
		}
		// An outage or a failover: tried again while the lease holds. A
		// worker that ended here left its lease held with nobody working
		// the partition: a pause after the failover never finished.
		if !w.outage(ctx, err) || !w.lease.Valid() {
			w.log.Warn("cannot load partition; giving the lease time to move on", "err", err)
			return false
		}
	}
	w.inOutage = false
	w.row = row
	// A state another owner left in flight may hide records it wrote after
	// its last checkpoint: re-align as part of taking the lease, and keep
	// the state. An ownership change is not a failure; only what alignment
	// finds (divergence, a recreated source...) is.
	switch row.State {
	case service.StateMirroring, service.StatePausing, service.StateStopping:
		for {
			err := w.takeOver(ctx)
			if err == nil {
				break
			}
			// Not the step loop's retry: the state must not be acted on
			// before the takeover's re-alignment is recorded.
			if !w.outage(ctx, err) {
				return w.handle(ctx, err)
			}
			if !w.lease.Valid() {
				return false
			}
		}
	}
	return true
}

// handle acts on a step's error: nothing, FAILED, or the end of the worker
// (false) when it stops or its lease is gone.
func (w *Worker) handle(ctx context.Context, err error) bool {
	var f *failure
	switch {
	case err == nil:
	case errors.Is(err, errStop), errors.Is(err, service.ErrLeaseLost), ctx.Err() != nil:
		if errors.Is(err, service.ErrLeaseLost) {
			w.log.Info("lease lost; worker stops", "err", err)
		}
		return false
	case errors.As(err, &f):
		w.fail(ctx, f)
	default:
		w.fail(ctx, &failure{msg: err.Error(), retryable: true})
	}
	return true
}

// takeOver re-aligns a partition that the previous owner left MIRRORING,
// PAUSING or STOPPING, keeping the state.
func (w *Worker) takeOver(ctx context.Context) error {
	return w.realign(ctx, w.lease.Previous, "")
}

// realign runs alignment without a state change and records the new
// checkpoint (and any records lost to retention) with an event: after a
// takeover (previous is the owner taken over from), or in place while
// MIRRORING (cause says why).
func (w *Worker) realign(ctx context.Context, previous, cause string) error {
	if err := w.awaitSettled(ctx); err != nil {
		return err
	}
	desire, err := w.desire(ctx)
	if err != nil {
		return err
	}
	res, err := w.align(ctx, desire)
	if err != nil {
		return err
	}
	row, err := w.p.Rows.Realign(service.PartitionRealignment{Mirror: w.key.Mirror,
		Topic: w.key.Topic, Partition: w.key.Partition, Owner: w.lease.Owner, Epoch: w.lease.Epoch,
		Takeover: cause == "", Previous: previous, Cause: cause, State: w.row.State,
		SrcNext: res.checkpoint.srcNext, DstNext: res.checkpoint.dstNext, SourceEnd: &res.srcEnd,
		LostRecordsAdd: res.lost, Summary: res.summary})
	if err != nil {
		return err
	}
	w.log.Info("partition re-aligned", "previous_owner", previous, "cause", cause,
		"state", row.State.String(), "reason", res.summary, "lost", res.lost)
	w.row = row
	return nil
}

// awaitSettled waits for the partition's earlier copies (the engine's
// unsettled.go), with its row saying so while it does.
func (w *Worker) awaitSettled(ctx context.Context) error {
	return w.p.Watch.AwaitSettled(ctx, w.key, func(copies int64, since time.Time) {
		w.noteError(ctx, w.row.State, fmt.Sprintf("waiting for the destination to answer %d copies of an earlier session "+
			"(unanswered since %s) before aligning; they are written off after %s",
			copies, since.UTC().Format(time.RFC3339), w.cfg.SettledWaitMax))
	})
}

// heal re-aligns a MIRRORING partition in place after its session was
// interrupted (the engine's destination_watch.go): with the verified
// progress saved, and, when the destination lost records, the row saying
// so until the realignment records where mirroring starts again.
func (w *Worker) heal(ctx context.Context, i Interruption, s *session) error {
	w.keepProgress(ctx, s, "re-aligning")
	if l, ok := w.p.Watch.TakeLoss(w.key); ok {
		w.noteLoss(ctx, service.StateMirroring, l)
	} else if i.Lost {
		w.noteError(ctx, service.StateMirroring, i.Msg)
	}
	w.log.Warn("re-aligning in place", "why", i.Msg)
	return w.realign(ctx, "", cmp.Or(i.Cause, i.Msg))
}

// desire returns the topic's desired state from the cache, re-reading it
// once when the topic is missing (a lease can be taken before the cache has
// seen a new topic); errStop when the topic is gone (mirror deleted). The
// first one found names the destination topic (dest).
func (w *Worker) desire(ctx context.Context) (Desire, error) {
	w.desiredChanged = w.p.Desires.Changed()
	d, ok := w.p.Desires.Desire(w.key.Mirror, w.key.Topic)
	if !ok {
		if err := w.p.Desires.Refresh(ctx); err != nil {
			return Desire{}, retryable("read desired state: %v", err)
		}
		if d, ok = w.p.Desires.Desire(w.key.Mirror, w.key.Topic); !ok {
			return Desire{}, errStop
		}
	}
	if w.dest == "" {
		w.dest = d.DestTopic
	}
	return d, nil
}

// safeStep is step with a panic kept to this partition: it becomes a
// retryable failure naming the panic, with the stack in the log, and the
// process and every other partition go on.
func (w *Worker) safeStep(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			w.log.Error("panic in partition worker", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = retryable("panic in partition worker: %v", v)
		}
	}()
	if s := w.cfg.BeforeStep; s != nil {
		s.Signal(StepPoint{Key: w.key, State: w.row.State})
	}
	return w.step(ctx)
}

// step takes the one action the current state and desire call for.
func (w *Worker) step(ctx context.Context) error {
	desire, err := w.desire(ctx)
	if err != nil {
		return err
	}
	state := w.row.State
	want := desire.State
	switch state {
	case service.StateUnknown, service.StateStopped:
		if want == service.DesiredStopped {
			return w.idle(ctx)
		}
		// In a prepare slot like the preparing itself: partitions stay
		// UNKNOWN until a slot can prepare them, so thousands added at once
		// do not all queue on the data pool (the change itself is grouped
		// with others', grouped_statements.go).
		release, err := w.p.Prepare.Acquire(ctx)
		defer release()
		if err != nil {
			return err
		}
		return w.transition(service.StatePreparing, transitionOpts{})
	case service.StatePreparing:
		if want == service.DesiredStopped {
			reason := "topic removed before mirroring started"
			if w.row.SrcNext != nil {
				// A partition that mirrored before (a retry, a takeover
				// whose alignment failed) is being failed over.
				reason = "topic removed (failover) while preparing"
			}
			return w.transition(service.StateStopping, transitionOpts{reason: reason})
		}
		if desire.Recreate && w.key.Partition != 0 {
			w.awaitingRecreate = true
			return w.idle(ctx) // partition 0's worker recreates the topic
		}
		// Not while idle above: a slot held there could keep partition 0
		// from the recreate the others wait for. Nor while an earlier
		// session's copies are in flight (the engine's unsettled.go).
		if err := w.awaitSettled(ctx); err != nil {
			return err
		}
		if l, ok := w.p.Watch.TakeLoss(w.key); ok {
			w.noteLoss(ctx, service.StatePreparing, l)
		}
		release, err := w.prepare(ctx)
		defer release()
		if err != nil {
			return err
		}
		if desire.Recreate {
			if err := w.recreateDestination(ctx, desire); err != nil {
				return err
			}
		} else if w.awaitingRecreate || w.row.SrcNext != nil {
			// Partition 0's recreate resets every checkpoint, and may land
			// between this worker's last write and this step, so that it
			// never waited for it: a checkpoint is read again before it is
			// aligned from.
			if err := w.reloadCheckpoint(ctx); err != nil {
				return err
			}
			w.awaitingRecreate = false
		}
		// The read-only ACL does not depend on where alignment resumes: it
		// is set up meanwhile (a round trip of a new topic's start), and both are
		// done before MIRRORING.
		readOnly := make(chan error, 1)
		go func() { readOnly <- w.enforceReadOnly(ctx, true) }()
		res, err := w.align(ctx, desire)
		if roErr := <-readOnly; err == nil {
			err = roErr
		}
		if err != nil {
			return err
		}
		return w.transition(service.StateMirroring, transitionOpts{checkpoint: &res.checkpoint, srcEnd: &res.srcEnd,
			lostAdd: res.lost, reason: res.summary, keepRetries: true})
	case service.StateMirroring:
		switch want {
		case service.DesiredPaused:
			return w.transition(service.StatePausing, transitionOpts{})
		case service.DesiredStopped:
			return w.transition(service.StateStopping, transitionOpts{reason: "topic removed (failover)"})
		}
		return w.mirror(ctx)
	case service.StatePausing:
		return w.transition(service.StatePaused, transitionOpts{})
	case service.StatePaused:
		switch want {
		case service.DesiredMirroring:
			if err := w.resumeCheck(ctx); err != nil {
				return err
			}
			return w.transition(service.StateMirroring, transitionOpts{reason: "resumed from the checkpoint"})
		case service.DesiredStopped:
			return w.transition(service.StateStopping, transitionOpts{reason: "topic removed (failover)"})
		}
		return w.idle(ctx)
	case service.StateStopping:
		if err := w.enforceReadOnly(ctx, false); err != nil {
			return err
		}
		return w.transition(service.StateStopped, transitionOpts{reason: "topic writable"})
	case service.StateFailed:
		if want == service.DesiredStopped {
			return w.transition(service.StatePreparing, transitionOpts{reason: "topic removed while FAILED"})
		}
		if !w.row.Retryable || w.row.RetryAttempt >= w.cfg.Retry.MaxAttempts {
			return w.idle(ctx) // waits for an operator
		}
		if w.row.NextRetryAt != nil {
			if err := w.waitUntil(ctx, *w.row.NextRetryAt); err != nil {
				return err
			}
			if d, ok := w.p.Desires.Desire(w.key.Mirror, w.key.Topic); !ok || d.State == service.DesiredStopped {
				return nil
			}
		}
		// The row keeps the failure's cause while the retry runs, so a
		// describe between attempts still says why nothing moves; reaching
		// MIRRORING clears it.
		return w.transition(service.StatePreparing, transitionOpts{errMsg: w.row.Error,
			reason: fmt.Sprintf("retry %d", w.row.RetryAttempt), keepRetries: true})
	}
	return permanent("unknown partition state %q", state)
}

// prepare takes one of the engine's prepare slots for what follows.
func (w *Worker) prepare(ctx context.Context) (func(), error) {
	release, err := w.p.Prepare.Acquire(ctx)
	if err != nil {
		return release, err
	}
	w.inSlot = true
	return func() { w.inSlot = false; release() }, nil
}

// readSlot bounds an alignment's record reads and offset-map queries (a
// takeover not handed back cleanly, a destination that moved) by the
// prepare slots, unless the worker holds one already.
func (w *Worker) readSlot(ctx context.Context) (release func(), err error) {
	if w.inSlot {
		return func() {}, nil
	}
	return w.prepare(ctx)
}

// idle waits for a desired-state change or the end of the lease.
func (w *Worker) idle(ctx context.Context) error {
	select {
	case <-w.desiredChanged:
		return nil
	case <-w.stopping:
		return errStop
	case <-ctx.Done():
		return errStop
	}
}

// waitUntil sleeps until t unless the desire changes or the worker stops.
func (w *Worker) waitUntil(ctx context.Context, t time.Time) error {
	for {
		d := time.Until(t)
		if d <= 0 {
			return nil
		}
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
			return nil
		case <-w.p.Pokes:
			timer.Stop()
			return nil
		case <-w.desiredChanged:
			timer.Stop()
			w.desiredChanged = w.p.Desires.Changed()
			if des, ok := w.p.Desires.Desire(w.key.Mirror, w.key.Topic); !ok || des.State == service.DesiredStopped {
				return nil
			}
		case <-w.stopping:
			timer.Stop()
			return errStop
		case <-ctx.Done():
			timer.Stop()
			return errStop
		}
	}
}

type transitionOpts struct {
	errMsg       string
	retry        bool
	retryAttempt int
	nextRetry    *time.Time
	checkpoint   *checkpoint
	// srcEnd, with checkpoint, is the source's end that alignment found
	// it against; the destination then ends at the checkpoint's dstNext.
	srcEnd      *int64
	lostAdd     int64
	reason      string
	keepRetries bool
}

// checkpoint is a partition's (src_next, dst_next).
type checkpoint struct {
	srcNext, dstNext int64
}

// transition writes one state change through the service (state machine,
// fencing, event and outbox), in a group with the other partitions'
// changes of the moment (the engine's grouped_statements.go). It is
// written even when the worker is stopping: it waits for the outcome,
// bounded by the write's own timeout.
func (w *Worker) transition(to service.PartitionState, o transitionOpts) error {
	t := service.PartitionTransition{Mirror: w.key.Mirror, Topic: w.key.Topic, Partition: w.key.Partition,
		Owner: w.lease.Owner, Epoch: w.lease.Epoch, From: w.row.State, To: to,
		Error: o.errMsg, Retryable: o.retry || to != service.StateFailed, RetryAttempt: o.retryAttempt,
		NextRetryAt: o.nextRetry, LostRecordsAdd: o.lostAdd, Reason: o.reason}
	if o.keepRetries {
		t.RetryAttempt = w.row.RetryAttempt
	}
	if o.checkpoint != nil {
		t.SrcNext, t.DstNext = &o.checkpoint.srcNext, &o.checkpoint.dstNext
		if o.srcEnd != nil {
			t.SourceEnd, t.DestinationEnd = o.srcEnd, &o.checkpoint.dstNext
		}
	}
	row, err := w.p.Rows.Transition(t)
	if err != nil {
		return err
	}
	w.log.Info("partition state", "from", t.From.String(), "to", to.String(), "reason", cmpStr(o.reason, o.errMsg))
	w.row = row
	return nil
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fail moves the partition to FAILED with the backoff of its next attempt.
func (w *Worker) fail(ctx context.Context, f *failure) {
	attempt := w.row.RetryAttempt
	var next *time.Time
	if f.retryable {
		attempt++
		t := time.Now().Add(backoff(w.cfg.Retry, attempt))
		next = &t
	}
	w.log.Warn("partition failed", "err", f.msg, "retryable", f.retryable, "attempt", attempt)
	if err := w.transition(service.StateFailed, transitionOpts{errMsg: f.msg, retry: f.retryable,
		retryAttempt: attempt, nextRetry: next}); err != nil {
		w.log.Warn("writing FAILED failed", "err", err)
		if !errors.Is(err, service.ErrLeaseLost) {
			// Do not spin on a database that is down.
			select {
			case <-time.After(time.Second):
			case <-w.stopping:
			case <-ctx.Done():
			}
		}
	}
}

// backoff is full-jitter exponential: uniform in [0, min(max, initial·2^(n-1))].
func backoff(p RetryPolicy, attempt int) time.Duration {
	ceil := p.Initial
	for i := 1; i < attempt && ceil < p.Max; i++ {
		ceil *= 2
	}
	ceil = min(ceil, p.Max)
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// noteLoss puts the destination's loss in the partition's row while it
// stays in state, with the destination's end as the watch found it, so that
// describe does not show the end the last checkpoint saw meanwhile.
func (w *Worker) noteLoss(ctx context.Context, state service.PartitionState, l Loss) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := w.p.Rows.RecordPartitionLoss(wctx, w.fence(), state, l.Msg, l.DestinationEnd); err != nil {
		w.log.Warn("recording the destination's loss failed", "err", err)
	}
}

// noteError puts msg in the partition's row while it stays in state, fenced
// by the lease, so describe says what the worker is about to repair.
func (w *Worker) noteError(ctx context.Context, state service.PartitionState, msg string) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := w.p.Rows.RecordPartitionError(wctx, w.fence(), state, msg); err != nil {
		w.log.Warn("recording the partition's error failed", "err", err)
	}
}
