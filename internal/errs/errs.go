// Package errs holds error helpers shared by packages that report several
// errors at once.
package errs

// Leaves splits an errors.Join result (recursively) into its parts, so each
// can be attributed (to a server) or prefixed (with a file and line).
func Leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, Leaves(e)...)
		}
		return out
	}
	return []error{err}
}
