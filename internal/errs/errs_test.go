package errs

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLeaves(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	assert.Equal(t, []error{a}, Leaves(a))
	assert.Equal(t, []error{a, b, c}, Leaves(errors.Join(a, errors.Join(b, c))))
}
