package views

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/deploy"
	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/registry"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/internal/cqlsession"
	"github.com/foldline/foldline/internal/textcap"
)

// VersionHistory is what the registry's history says of one table version
// of a view: which code built it and what changed under it since.
type VersionHistory struct {
	Table string `json:"table"`
	// Events are the table's history, oldest first (registry.Event).
	Events []registry.Event `json:"events"`
	// InPlaceChanges counts the code changes made under the table without
	// rebuilding it (deploy --in-place): with none, the table equals the
	// fold of the ledger under the code that built it.
	InPlaceChanges int `json:"inPlaceChanges"`
}

// readHistory returns the history of every version of view, by table,
// newest version first (tables a history names but the registry no longer
// lists are left out).
func readHistory(ctx context.Context, cmd target.Command, keyspace, view string, tables []string) ([]VersionHistory, error) {
	cql, err := cqlx.Connect(cmd.Services)
	if err != nil {
		return nil, err
	}
	defer cqlsession.Close(cql)
	history, err := registry.History(ctx, cql, keyspace, view)
	if err != nil {
		return nil, err
	}
	out := []VersionHistory{}
	for _, table := range slices.Backward(tables) {
		events := history[table]
		if events == nil {
			events = []registry.Event{}
		}
		out = append(out, VersionHistory{Table: table, Events: events, InPlaceChanges: len(registry.InPlaceChanges(events))})
	}
	return out, nil
}

// writeHistory prints each version's history: the code that built it, the
// in-place changes with the ledger positions where they took effect, the
// switches of readers.
func writeHistory(w io.Writer, versions []VersionHistory) {
	fmt.Fprintln(w, "\nhistory (the registry's), newest version first:")
	for _, v := range versions {
		switch {
		case len(v.Events) == 0:
			fmt.Fprintf(w, "  %s: no history recorded (made before Foldline recorded the code of its tables)\n", v.Table)
			continue
		case v.InPlaceChanges == 0:
			if _, ok := registry.CurrentCode(v.Events); ok {
				fmt.Fprintf(w, "  %s: the fold of the ledger under the code that built it\n", v.Table)
			} else {
				fmt.Fprintf(w, "  %s\n", v.Table)
			}
		default:
			fmt.Fprintf(w, "  %s: %d in-place code change(s): the rows hold the old code's results for the ledger before each and the new code's after, the fold of the ledger under no one code (foldline backfill rebuilds it)\n", v.Table, v.InPlaceChanges)
		}
		code := map[string]registry.StageCode{}
		for _, ev := range v.Events {
			fmt.Fprintf(w, "    %s  %s\n", ev.At.UTC().Format(time.RFC3339), textcap.Line(describeEvent(ev, code)))
			switch ev.Kind {
			case registry.EventBuilt, registry.EventRecorded:
				clear(code)
				fallthrough
			case registry.EventInPlace:
				for _, sc := range ev.Stages {
					code[sc.Stage] = sc
				}
			}
		}
	}
}

// describeEvent is one line of a version's history; code is the code of
// the table before ev.
func describeEvent(ev registry.Event, code map[string]registry.StageCode) string {
	by := ""
	if ev.By != "" {
		by = " by " + ev.By
	}
	switch ev.Kind {
	case registry.EventBuilt:
		return fmt.Sprintf("built%s from the ledger's first event with %s", by, stagesLine(ev.Stages, nil))
	case registry.EventRecorded:
		return fmt.Sprintf("code recorded%s (what built it before is not known): %s", by, stagesLine(ev.Stages, nil))
	case registry.EventInPlace:
		return fmt.Sprintf("code changed in place%s%s: %s", by, positionsLine(" after ledger position ", ev.Positions), stagesLine(ev.Stages, code))
	case registry.EventActivated:
		return "readers switched to it" + by
	case registry.EventDeactivated:
		line := "readers switched away" + by
		if !ev.Until.IsZero() {
			line += fmt.Sprintf("; its functions keep it up to date for a rollback until %s", ev.Until.UTC().Format(time.RFC3339))
		}
		return line
	case registry.EventStopped:
		return "its functions were removed: it follows the ledger no more" + by + positionsLine(", stopped at about ledger position ", ev.Positions)
	}
	return ev.Kind + by
}

// stagesLine lists stages' code, each as before → after when before (the
// code until then) has the stage.
func stagesLine(stages []registry.StageCode, before map[string]registry.StageCode) string {
	parts := make([]string, 0, len(stages))
	for _, sc := range stages {
		part := sc.Stage + " " + codeWords(sc)
		if old, ok := before[sc.Stage]; ok {
			part = sc.Stage + " " + codeWords(old) + " → " + codeWords(sc)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

func codeWords(sc registry.StageCode) string {
	config := "?"
	if sc.Config != "" {
		config = shortDigest(sc.Config)
	}
	return fmt.Sprintf("(binary %s, config %s)", shortDigest(sc.Binary), config)
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func positionsLine(prefix string, positions map[string]string) string {
	if len(positions) == 0 {
		return ""
	}
	topics := make([]string, 0, len(positions))
	for topic := range positions {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	parts := make([]string, len(topics))
	for i, topic := range topics {
		parts[i] = topic + " " + positions[topic]
	}
	return prefix + strings.Join(parts, ", ")
}

// newGCCommand returns `foldline views gc`.
func newGCCommand() *cobra.Command {
	var opts Options
	cmd := &cobra.Command{
		Use:   "gc [DIR]",
		Short: "Stop the versions whose rollback grace is over",
		Long: `Retire the functions of every table version a switch left whose rollback grace
(the view's rollbackGrace, or backfill/views --grace) is over, unless another path still
needs them, and record in the registry's history that it stopped following the ledger
and where. The tables stay (as they were); activating one afterwards is refused as stale.
foldline deploy and foldline backfill do the same each time they run: there is no
daemon.`,
		Example: "  foldline views gc\n  foldline views gc --tenant shop-test -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, err := opts.Bind(cmd, args)
			if err != nil {
				return err
			}
			retired, err := deploy.RetireExpiredPaths(cmd.Context(), deploy.Options{Command: opts.Command}, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				if retired == nil {
					retired = []deploy.Retired{}
				}
				return target.WriteJSON(opts.Out, retired)
			}
			for _, r := range retired {
				fmt.Fprintf(opts.Out, "%s: %s stopped (%d resources removed)\n", r.View, r.Table, len(r.Removed))
			}
			if len(retired) == 0 {
				fmt.Fprintln(opts.Out, "Nothing to retire: every version a switch left is still in its rollback grace, or stopped already.")
			}
			return nil
		},
	}
	opts.Target.Register(cmd.Flags())
	return cmd
}
