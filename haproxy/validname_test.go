package haproxy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/haproxy-weighter/haproxy-weighter/internal/testenv"
)

// ValidName lets validate refuse what run would: a name it accepts is taken
// by a real HAProxy (in its configuration and on the runtime socket), and a
// name it refuses is refused by Check too, before anything is sent.
func TestValidNameMatchesWhatIsSent(t *testing.T) {
	const good = "be.App:v2_x-1"
	h := testenv.StartHAProxy(t, testenv.HAProxyDefaults+fmt.Sprintf(
		"backend %s\n  balance roundrobin\n  server %s 127.0.0.1:%d\n", good, good, testenv.FreePort(t)))
	c := newClient(t, h.Socket)
	require.NoError(t, ValidName(good))
	require.NoError(t, c.Backend(good).Check(testCtx(t)))
	assert.Contains(t, byName(t, c.Backend(good)), good)

	for name, char := range map[string]string{
		"be app": `' '`, "be;show info": `';'`, "be\nshow info": `'\n'`, "be/s1": `'/'`, "bé": `'é'`, "be\t": `'\t'`,
	} {
		err := ValidName(name)
		if assert.Error(t, err, "%q", name) {
			assert.Equal(t, "character "+char+" is not allowed in HAProxy names (letters, digits, '.', ':', '_', '-')", err.Error())
		}
		assert.ErrorContains(t, c.Backend(name).Check(testCtx(t)), "character "+char+" is not allowed", "%q", name)
	}
	assert.EqualError(t, ValidName(""), "empty name")
}
