package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A web configuration file that does not decode is named, and no value of
// it is shown: a basic_auth_users password hash written with a wrong tag
// reached validate's output and the log.
func TestCheckWebConfigNeverQuotesTheValue(t *testing.T) {
	const hash = "$2y$10$s3cr3tHashValueXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"
	for _, body := range []string{"basic_auth_users:\n  alice: !!int " + hash + "\n", "basic_auth_users: {alice: [" + hash + "]}\n"} {
		path := filepath.Join(t.TempDir(), "web.yml")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		err := CheckWebConfig(path)
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), "web config file "+path+": ")
		assert.NotContains(t, err.Error(), "s3cr3t", body)
	}
}
