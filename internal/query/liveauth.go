package query

import (
	"errors"
	"fmt"

	"github.com/weir-dev/weir/internal/httpauth"
)

// LoadLiveAuth reads a running capture's bearer token (tokenFile) and
// the CA that signed its certificate (caFile), either of them "": none.
// Errors name weir query's flags, --api-token-file and --api-ca.
func LoadLiveAuth(tokenFile, caFile string) (LiveAuth, error) {
	var a LiveAuth
	if tokenFile != "" {
		tok, err := httpauth.LoadToken(tokenFile)
		if err != nil {
			return a, fmt.Errorf("--api-token-file: %w", err)
		}
		a.Token = string(tok)
	}
	if caFile != "" {
		var err error
		if a.TLS, err = httpauth.ClientTLS(caFile); err != nil {
			return a, fmt.Errorf("--api-ca: %w", err)
		}
	}
	return a, nil
}

// Describe is err as a command line shows it: a mistake in a query
// string as "PART: MESSAGE" with a caret line under the mistake, any
// other error as is.
func Describe(err error) string {
	var se *SyntaxError
	var ae *ArgError
	if errors.As(err, &ae) && errors.As(err, &se) {
		return fmt.Sprintf("%s: %s\n%s", ae.Part, se.Msg, se.Caret())
	}
	return err.Error()
}
