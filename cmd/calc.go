package cmd

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/haproxy-weighter/haproxy-weighter/cmd/internal/cli"
	"github.com/haproxy-weighter/haproxy-weighter/weighter"
)

func newCalcCmd() *cobra.Command {
	p := weighter.DefaultPolicy()
	c := &cobra.Command{
		Use:   "calc [flags] -- LOAD...",
		Short: "Print the weights a weighting function gives to the loads (no I/O)",
		Example: "  haproxy-weighter calc --function limited-proportions --limiting-factor 4 --aggressiveness 1 -- 10 20 40 0\n" +
			"  112 56 28 256",
		Args: cli.Args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.Validate(); err != nil {
				return policyFlagsError(cmd.Flags(), err)
			}
			loads, err := parseLoads(args)
			if err != nil {
				return err
			}
			weights, err := weighter.Compute(p, loads, nil)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), joinInts(weights))
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&p.Function, "function", p.Function, "weighting function: "+strings.Join(weighter.FunctionNames(), ", "))
	f.Float64Var(&p.LimitingFactor, "limiting-factor", p.LimitingFactor, "no server counts as lighter than mean/limiting-factor (> 1)")
	f.Float64Var(&p.Aggressiveness, "aggressiveness", p.Aggressiveness, "exponent of the load ratio (> 0)")
	f.IntVar(&p.MaxWeight, "max-weight", p.MaxWeight, "weight of the lightest server (1..256)")
	return c
}

// parseLoads reads finite, non-negative numbers; anything else names its position.
func parseLoads(args []string) ([]float64, error) {
	loads := make([]float64, len(args))
	for i, a := range args {
		v, err := strconv.ParseFloat(a, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange): // out of range: v is ±Inf, said below
			return nil, fmt.Errorf("load %d (%q) is not a number", i+1, a)
		case math.IsNaN(v) || math.IsInf(v, 0):
			return nil, fmt.Errorf("load %d (%q) must be a finite number", i+1, a)
		case v < 0:
			return nil, fmt.Errorf("load %d (%q) must not be negative", i+1, a)
		}
		loads[i] = v
	}
	return loads, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, " ")
}
