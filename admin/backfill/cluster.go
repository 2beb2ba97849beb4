package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/backfillrecord"
	"github.com/foldline/foldline/admin/internal/gobuild"
	"github.com/foldline/foldline/admin/internal/localrun"
	"github.com/foldline/foldline/admin/internal/pulsarx"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/admin/manifest"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/internal/services"
	"github.com/foldline/foldline/sinks/cassandra"
)

// EngineCluster runs what EngineFused runs on this machine on the cluster
// instead: the functions worker runs it as one function, the backfill's
// runner (package runner), whose binary holds the path's transformations
// and the fused run's driver. The runner writes the same checkpoints into
// the backfill's record; when its process dies the worker starts it again
// and it resumes from the last one. The CLI that started it (or a later
// foldline backfill --watch) waits until it is done, removes it, and
// deploys the copy from where it stopped, as after a fused run. Every
// function of the path must be a transformation's one-line main.
const EngineCluster = "cluster"

// The runner's user config: where it finds Pulsar and Cassandra (its
// credentials are its secrets, as a sink's).
const (
	runnerPulsarURL   = "foldlinePulsarURL"
	runnerAdminURL    = "foldlineAdminURL"
	runnerHosts       = "hosts"
	runnerTrustCerts  = "foldlineTLSTrustCerts"
	runnerMemoryLimit = 1024
)

// runnerRetries is how often the runner tries a run that failed (a broker
// or Cassandra away for a while) before it gives its job up to its
// dead-letter topic: each try resumes from the last checkpoint, with the
// runtime's backoff (up to a minute) in between.
const runnerRetries = 1000

// clusterJob is the message that starts a backfill's runner: which
// backfill, and the manifests it was started from (the runner has no
// checkout).
type clusterJob struct {
	View  string `json:"view"`
	Table string `json:"table"`
	// Tenant is the --tenant the backfill was started with.
	Tenant string `json:"tenant,omitempty"`
	// Manifests are the manifest files, by path under the manifest
	// directory.
	Manifests  map[string]string `json:"manifests"`
	Checkpoint time.Duration     `json:"checkpoint,omitempty"`
	MaxRate    int               `json:"maxRate,omitempty"`
}

// fuseOnCluster runs rec's fused run on the cluster: it builds and deploys
// the runner, unless it runs already (a CLI that died started it), starts
// it with the job, and waits until the run is done, saying how far it got;
// then it removes the runner. The run goes on without this CLI.
func (e *env) fuseOnCluster(ctx context.Context, opts Options, forked []*manifest.Stage, rec *backfillrecord.Record) error {
	st := backfillrecord.RunnerOf(forked)
	_, err := e.pulsar.Functions.GetFunctionWithContext(ctx, st.Tenant, st.Namespace, st.Name)
	switch {
	case pulsarx.IsNotFound(err):
		if err := e.startRunner(ctx, opts, forked, rec, st); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("reading function %s: %w", st.FullName(), err)
	default:
		fmt.Fprintf(opts.ErrOut, "the backfill of %s runs on the cluster as function %s: following it\n", rec.View, st.FullName())
		if rec.Fused == nil || rec.Fused.Runs == 0 {
			// No run started yet: the CLI that deployed it may have died
			// before it sent the job. A second job waits behind the first
			// and finds the run done.
			if err := e.sendJob(ctx, opts, rec, st); err != nil {
				return err
			}
		}
	}
	if err := e.awaitRunner(ctx, opts, rec, st); err != nil {
		return err
	}
	_, err = e.removeRunner(ctx, opts, forked)
	return err
}

// removeRunner deletes the runner of the backfill of forked (the copy's
// stages) and its topics.
func (e *env) removeRunner(ctx context.Context, opts Options, forked []*manifest.Stage) ([]string, error) {
	st := backfillrecord.RunnerOf(forked)
	deleted, err := e.deleteStages(ctx, []*manifest.Stage{st}, opts.ErrOut)
	if err != nil {
		return deleted, err
	}
	topics := []string{st.Inputs[0], runnerDeadLetters(st)}
	if err := deploy.DeleteTopics(ctx, e.pulsar, topics); err != nil {
		return deleted, err
	}
	return append(deleted, topics...), nil
}

// runnerDeadLetters is the dead-letter topic of the runner st: where its
// job goes if it fails for good.
func runnerDeadLetters(st *manifest.Stage) string { return st.Inputs[0] + "-DLQ" }

// startRunner builds rec's runner, deploys it as st and sends it its job.
func (e *env) startRunner(ctx context.Context, opts Options, forked []*manifest.Stage, rec *backfillrecord.Record, st *manifest.Stage) error {
	bin, err := localrun.BuildRunner(ctx, forked, opts.Builder)
	if err != nil {
		return fmt.Errorf("building the runner of the backfill of %s on the cluster (--engine fused runs it on this machine, --engine deployed stage by stage): %w", rec.View, err)
	}
	uc := map[string]any{
		runnerPulsarURL: opts.Services.PulsarURL, runnerAdminURL: opts.Services.PulsarAdminURL,
		runnerHosts: opts.Services.SinkHosts(), manifest.UserConfigMaxRetries: runnerRetries,
		manifest.UserConfigDeadLetterTopic: runnerDeadLetters(st),
	}
	if opts.Services.PulsarTLSTrustCertsFile != "" {
		uc[runnerTrustCerts] = opts.Services.PulsarTLSTrustCertsFile
	}
	if err := deploy.CreateJob(ctx, opts.Options, e.pulsar, e.cql, e.set, deploy.Job{Stage: st, Binary: bin, UserConfig: uc, MemoryLimitMB: runnerMemoryLimit}); err != nil {
		return err
	}
	if err := e.sendJob(ctx, opts, rec, st); err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "the backfill of %s runs on the cluster as function %s (foldline backfill --watch %s follows it; this command may stop)\n", rec.View, st.FullName(), rec.View)
	return nil
}

// sendJob sends the runner st the job of rec: the manifests of opts.
func (e *env) sendJob(ctx context.Context, opts Options, rec *backfillrecord.Record, st *manifest.Stage) error {
	files, err := manifestFiles(opts.Dir)
	if err != nil {
		return err
	}
	job, err := json.Marshal(clusterJob{View: rec.View, Table: rec.Table, Tenant: opts.Target.Tenant, Manifests: files, Checkpoint: opts.Checkpoint, MaxRate: opts.MaxRate})
	if err != nil {
		return fmt.Errorf("encoding the job of the backfill of %s: %w", rec.View, err)
	}
	client, err := pulsarx.NewClient(opts.Services)
	if err != nil {
		return err
	}
	defer client.Close()
	producer, err := client.CreateProducer(pulsar.ProducerOptions{Topic: st.Inputs[0]})
	if err != nil {
		return fmt.Errorf("creating a producer on %s: %w", st.Inputs[0], err)
	}
	defer producer.Close()
	if _, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: job}); err != nil {
		return fmt.Errorf("sending the backfill of %s to its runner: %w", rec.View, err)
	}
	return nil
}

// awaitRunner waits until rec's run on the cluster is done, and says every
// few seconds how far it got, and why its runner failed when it did.
func (e *env) awaitRunner(ctx context.Context, opts Options, rec *backfillrecord.Record, st *manifest.Stage) error {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	var said time.Time
	var lastFailure string
	for {
		cur, err := e.store.ByTable(ctx, rec.View, rec.Table)
		if err != nil {
			return err
		}
		if cur == nil || cur.State != backfillrecord.StateRunning {
			return fmt.Errorf("the backfill of %s into %s is no longer running (aborted?): %w", rec.View, rec.Table, ErrTakenOver)
		}
		*rec = *cur
		if f := rec.Fused; f != nil && f.Done {
			fmt.Fprintf(opts.ErrOut, "the run of the backfill of %s on the cluster is done: %d ledger events in %d run(s)\n", rec.View, f.Events, f.Runs)
			return nil
		}
		if time.Since(said) >= 5*time.Second {
			said = time.Now()
			if f := rec.Fused; f != nil && f.Runs > 0 {
				fmt.Fprintf(opts.ErrOut, "backfill of %s on the cluster: %d ledger events written (run %d)\n", rec.View, f.Events, f.Runs)
			}
			if failure := e.runnerFailure(ctx, st); failure != "" && failure != lastFailure {
				lastFailure = failure
				fmt.Fprintf(opts.ErrOut, "the runner %s failed, and tries again from its checkpoint: %s\n", st.FullName(), failure)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// runnerFailure returns the runner's latest error ("" for none).
func (e *env) runnerFailure(ctx context.Context, st *manifest.Stage) string {
	status, err := e.pulsar.Functions.GetFunctionStatusWithContext(ctx, st.Tenant, st.Namespace, st.Name)
	if err != nil {
		return ""
	}
	for _, inst := range status.Instances {
		if ex := inst.Status.LatestUserExceptions; len(ex) > 0 {
			return ex[len(ex)-1].ExceptionString
		}
	}
	return ""
}

// maxManifestBytes bounds the manifest directory a job carries: the job is
// one message (Pulsar's default limit is 5 MB).
const maxManifestBytes = 4 << 20

// manifestFiles returns the files under the manifest directory dir (the
// manifests and what they name, such as samples), by path under it.
func manifestFiles(dir string) (map[string]string, error) {
	files := map[string]string{}
	total := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if total += len(data); total > maxManifestBytes {
			return fmt.Errorf("more than %d bytes of files: a backfill on the cluster carries them in one message", maxManifestBytes)
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the manifest directory %s: %w", dir, err)
	}
	return files, nil
}

// writeManifests writes files (manifestFiles) under dir; a path that would
// leave dir is refused.
func writeManifests(dir string, files map[string]string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dir, err)
	}
	defer root.Close()
	for name, data := range files {
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			return fmt.Errorf("manifest path %q is not under the manifest directory", name)
		}
		if d := filepath.Dir(filepath.FromSlash(name)); d != "." {
			if err := root.MkdirAll(d, 0o700); err != nil {
				return fmt.Errorf("writing manifest %s: %w", name, err)
			}
		}
		if err := root.WriteFile(filepath.FromSlash(name), []byte(data), 0o600); err != nil {
			return fmt.Errorf("writing manifest %s: %w", name, err)
		}
	}
	return nil
}

// RunJob is the handler of a backfill's runner on the cluster (package
// runner): it runs the fused run of the job in payload (clusterJob) with
// the path's chain in chain (the runner's own binary), from the backfill's
// checkpoint, and returns once it is done. A job whose backfill is done,
// aborted or taken over is over at once. An error is the runtime's to
// retry (runnerRetries), the run resuming from its checkpoint each time.
func RunJob(ctx context.Context, payload []byte, chain string) error {
	fc, ok := pf.FromContext(ctx)
	if !ok {
		return pf.Permanent(errors.New("a backfill's runner runs under the functions worker"))
	}
	var job clusterJob
	if err := json.Unmarshal(payload, &job); err != nil {
		return pf.Permanent(fmt.Errorf("reading the job of a backfill's runner: %w", err))
	}
	str := func(key string) string { s, _ := fc.GetUserConfValue(key).(string); return s }
	svc := services.Services{PulsarURL: str(runnerPulsarURL), PulsarAdminURL: str(runnerAdminURL), CassandraHost: str(runnerHosts), PulsarTLSTrustCertsFile: str(runnerTrustCerts)}
	svc.PulsarToken, _ = fc.GetSecret("token")
	svc.CassandraUser, _ = fc.GetSecret(cassandra.SecretUsername)
	svc.CassandraPassword, _ = fc.GetSecret(cassandra.SecretPassword)
	dir, err := os.MkdirTemp("", "foldline-runner-")
	if err != nil {
		return fmt.Errorf("making a directory for the manifests: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := writeManifests(dir, job.Manifests); err != nil {
		return pf.Permanent(err)
	}
	opts := Options{View: job.View, Engine: EngineCluster, Checkpoint: job.Checkpoint, MaxRate: job.MaxRate}
	opts.Command = target.Command{Dir: dir, Target: target.Flags{Tenant: job.Tenant}, Services: svc, ErrOut: os.Stderr, Out: os.Stderr}
	opts.defaults()
	e, err := open(ctx, opts)
	if err != nil {
		return err
	}
	defer e.Close()
	rec, err := e.store.ByTable(ctx, job.View, job.Table)
	if err != nil {
		return err
	}
	if rec == nil || rec.State != backfillrecord.StateRunning || rec.Engine != EngineCluster || rec.Fused == nil || rec.Fused.Done {
		slog.Info("the backfill is not running on the cluster (done, switched or aborted): nothing to do", "view", job.View, "table", job.Table)
		return nil
	}
	forked, err := e.forkedOf(rec)
	if err != nil {
		return pf.Permanent(err)
	}
	if applied, err := e.claimRun(ctx, rec); err != nil {
		return err
	} else if !applied {
		return fmt.Errorf("taking the backfill of %s over: its record changed meanwhile; trying again", job.View)
	}
	opts.chain = &gobuild.Binary{Path: chain}
	_, err = e.fuse(ctx, opts, forked, rec)
	if errors.Is(err, ErrTakenOver) {
		slog.Info("the backfill's run was taken over (aborted, or another runner): stopping", "view", job.View, "error", err)
		return nil
	}
	return err
}
