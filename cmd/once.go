package cmd

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
	"github.com/haproxy-weighter/haproxy-weighter/daemon"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func newOnceCmd(logging *cli.Logging) *cobra.Command {
	var apply bool
	var output string
	c := &cobra.Command{
		Use:   "once",
		Short: "Run one cycle and print the plan (dry run unless --apply)",
		Args:  cli.Args(cobra.NoArgs),
	}
	cf := addConfigFlags(c, false)
	c.Flags().BoolVar(&apply, "apply", false, "write the new weights (default: only print them)")
	c.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if output != "table" && output != "json" {
			return cli.Usage(fmt.Errorf("--output: %q is not table or json", output))
		}
		log, err := logging.Logger(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		cfg, err := cf.load()
		if err != nil {
			return err
		}
		logWarnings(log, cfg)
		// run's start checks and cycle: a backend whose algorithm ignores or
		// refuses runtime weights fails here too, dry run or not.
		cycles, err := daemon.New(cfg, daemon.Options{Log: log}).RunOnce(cmd.Context(), apply)
		if err != nil {
			return err
		}
		if output == "json" {
			err = printJSON(cmd.OutOrStdout(), cycles)
		} else {
			err = printTables(cmd.OutOrStdout(), cycles, apply)
		}
		return errors.Join(err, cyclesError(cycles))
	}
	return c
}

// cyclesError is non-nil when a source or target could not be read or written.
func cyclesError(cycles []weighter.Cycle) error {
	var errs []error
	for _, c := range cycles {
		if c.Err != nil {
			errs = append(errs, fmt.Errorf("backend %s: %s: %w", c.Backend, c.Result, c.Err))
		}
	}
	return errors.Join(errs...)
}

// printTables prints each cycle's plan; apply is whether --apply was given.
func printTables(w io.Writer, cycles []weighter.Cycle, apply bool) error {
	for i, c := range cycles {
		if i > 0 {
			fmt.Fprintln(w)
		}
		mode := "dry run, nothing written (use --apply to write)"
		switch {
		case apply && !c.Applied:
			mode = "dry run (dry_run: true), nothing written"
		case c.Applied:
			mode = fmt.Sprintf("applied, %d weights written", len(c.Written))
		}
		fmt.Fprintf(w, "backend %s: %s; %s\n", c.Backend, c.Result, mode)
		if c.Plan.Function != "" {
			fmt.Fprintf(w, "function %s, coverage %.0f%%, imbalance (max/mean load) %.2f\n",
				c.Plan.Function, 100*c.Plan.Coverage, c.Plan.Imbalance)
		}
		if c.Signal != nil {
			fmt.Fprintf(w, "signal: %s\n", signalLine(c.Signal))
		}
		if c.Plan.Hold {
			fmt.Fprintf(w, "holding: %s\n", c.Plan.Reason)
		}
		if len(c.Plan.Servers) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SERVER\tADDRESS\tLOAD\tCURRENT\tNEW\tACTION\tREASON")
		for _, s := range c.Plan.Servers {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.Server, cmp.Or(s.Address, "-"), weighter.LoadText(s.Load), s.Current, s.New, s.Action, s.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		printShed(w, c)
		for _, l := range weighter.PinLines(c.Plan.Pins, !c.Applied) {
			fmt.Fprintln(w, l)
		}
	}
	return nil
}

// signalLine says where the loads came from: the pipeline, the fast
// signal's state, and the calibrating source's window and data age.
func signalLine(s *weighter.Signal) string {
	parts := []string{s.Pipeline, "fast signal " + string(s.Fast)}
	if s.FastReason != "" {
		parts[1] += " (" + s.FastReason + ")"
	}
	if s.Calibrate && s.Window > 0 {
		parts = append(parts, "calibration window "+s.Window.String())
	}
	if s.ExternalAge >= 0 {
		parts = append(parts, "external data "+s.ExternalAge.Round(time.Second).String()+" old")
	}
	if s.ExternalError != "" {
		parts = append(parts, "external source failed: "+s.ExternalError)
	}
	return strings.Join(parts, "; ")
}

// cycleJSON is the --output json form of one backend's cycle.
type cycleJSON struct {
	Backend string        `json:"backend"`
	Result  string        `json:"result"`
	Error   string        `json:"error,omitempty"`
	Applied bool          `json:"applied"`
	Written []changeJSON  `json:"written"`
	Plan    weighter.Plan `json:"plan"`
	// Signal is what the loads were made of, for a backend that reads the
	// fast signal: the pipeline and, per server, its fast inputs.
	Signal *signalJSON `json:"signal,omitempty"`
	// Sheds are the sessions closes tried (with --apply) and their outcomes.
	Sheds []shedResultJSON `json:"sheds,omitempty"`
}

// signalJSON is weighter.Signal with durations in seconds.
type signalJSON struct {
	Pipeline   string `json:"pipeline"`
	Fast       string `json:"fast"`
	FastReason string `json:"fast_reason,omitempty"`
	// Reader is what the fast signal read: kernel, sessions or stat.
	Reader    string `json:"reader,omitempty"`
	Streams   int    `json:"streams,omitempty"`
	Calibrate bool   `json:"calibrate"`
	// WindowSeconds is the span each external point averages over.
	WindowSeconds float64 `json:"window_seconds,omitempty"`
	// ExternalAgeSeconds is the age of the newest external point; null before the first.
	ExternalAgeSeconds *float64 `json:"external_age_seconds"`
	ExternalError      string   `json:"external_error,omitempty"`
	Uncalibrated       int      `json:"uncalibrated"`
	// Servers are the fast inputs: load = factor × local / max(sessions, 1).
	Servers map[string]weighter.FastInput `json:"servers"`
}

func newSignalJSON(s *weighter.Signal) *signalJSON {
	if s == nil {
		return nil
	}
	out := &signalJSON{Pipeline: s.Pipeline, Fast: string(s.Fast), FastReason: s.FastReason, Reader: s.Reader, Streams: s.Streams,
		Calibrate: s.Calibrate, WindowSeconds: s.Window.Seconds(), ExternalError: s.ExternalError,
		Uncalibrated: s.Uncalibrated, Servers: s.Servers}
	if s.ExternalAge >= 0 {
		age := s.ExternalAge.Round(time.Second).Seconds() // the points' own resolution
		out.ExternalAgeSeconds = &age
	}
	if out.Servers == nil {
		out.Servers = map[string]weighter.FastInput{}
	}
	return out
}

// changeJSON is a written weight, with the lower-case keys of the rest of the
// output (weighter.Change has no JSON tags).
type changeJSON struct {
	Server string `json:"server"`
	Weight int    `json:"weight"`
}

func printJSON(w io.Writer, cycles []weighter.Cycle) error {
	out := make([]cycleJSON, len(cycles))
	for i, c := range cycles {
		out[i] = cycleJSON{Backend: c.Backend, Result: c.Result, Applied: c.Applied, Written: []changeJSON{}, Plan: c.Plan,
			Signal: newSignalJSON(c.Signal), Sheds: shedResults(c.Sheds)}
		for _, w := range c.Written {
			out[i].Written = append(out[i].Written, changeJSON{Server: w.Server, Weight: w.Weight})
		}
		if out[i].Plan.Servers == nil { // a cycle that failed before planning: [] for jq, not null
			out[i].Plan.Servers = []weighter.ServerPlan{}
		}
		if c.Err != nil {
			out[i].Error = c.Err.Error()
		}
		if math.IsNaN(out[i].Plan.Imbalance) || math.IsInf(out[i].Plan.Imbalance, 0) {
			out[i].Plan.Imbalance = 0
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
