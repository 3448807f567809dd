package weighter

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRefuseBatch(t *testing.T) {
	require.NoError(t, RefuseBatch("t", []Change{{"a", 0}, {"b", 256}}, nil))
	require.NoError(t, RefuseBatch("t", nil, nil))

	err := RefuseBatch("backend be", []Change{{"a", 10}, {"b", 257}, {"a", 20}, {"c", -1}, {"bad name", 5}},
		func(ch Change) error {
			if ch.Server == "bad name" {
				return errors.New("name has a space")
			}
			return nil
		})
	require.Error(t, err)
	assert.Equal(t, "backend be: nothing written: 4 of 5 changes refused\n"+
		"server b: invalid weight: 257 outside 0..256\n"+
		"server a: more than one change in the batch (weight 20)\n"+
		"server c: invalid weight: -1 outside 0..256\n"+
		"server bad name: name has a space", err.Error())
	assert.ErrorIs(t, err, ErrInvalidWeight)
	var se *ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "b", se.Server)
}
