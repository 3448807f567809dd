package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// StarShipped puts the shipped daemon after the baselines as the only
// default, once, whatever the candidates said of themselves.
func TestStarShipped(t *testing.T) {
	pls, err := SelectPipelines("fast," + RecommendedPipeline)
	require.NoError(t, err)
	require.True(t, pls[len(pls)-1].Default, "fleet×ratio calls itself the default")
	for _, in := range [][]Pipeline{pls, StarShipped(pls), {}} {
		got := StarShipped(in)
		var names, starred []string
		for _, p := range got {
			names = append(names, p.Name)
			if p.Default {
				starred = append(starred, p.Name)
			}
		}
		assert.Equal(t, []string{ShippedName}, starred)
		at := 0
		if len(in) > 0 {
			at = 3
			assert.Equal(t, []string{"leastconn", "agent-check", "oracle", ShippedName, "fast", RecommendedPipeline}, names)
		}
		assert.Equal(t, ShippedPipeline(), got[at])
	}
	assert.True(t, pls[len(pls)-1].Default, "the input is left as it was")
}
