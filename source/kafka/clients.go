package kafka

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// connectionKey identifies the settings a client's connections depend on.
// It is a hash, so that credentials do not sit in map keys.
func connectionKey(seeds []string, c clientSettings) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%q\x00%v\x00%q",
		strings.Join(seeds, ","), c.protocol, c.mechanism, c.user, c.pass, c.trustFile, c.trustPEM,
		c.keystoreFile, c.certChainPEM, c.keyPEM, c.verifyHostname, c.clientID)
	return hex.EncodeToString(h.Sum(nil))
}
