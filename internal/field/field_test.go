package field

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKeysAreFoundThroughWrapsAndJoins(t *testing.T) {
	url := Errorf("url", "url: must be set")
	auth := Wrap(errors.New("basic_auth: username must be set with password"), "basic_auth", "username")
	assert.Equal(t, "url: must be set", url.Error(), "the message is unchanged")
	assert.Equal(t, []string{"url"}, Keys(fmt.Errorf("prometheus: %w", errors.Join(url, auth))), "the first problem's")
	assert.Equal(t, []string{"basic_auth", "username"}, Keys(fmt.Errorf("prometheus: %w", auth)))
	assert.Nil(t, Keys(errors.New("a problem of the whole value")))
	assert.NoError(t, Wrap(nil, "url"))
}
