// The haproxy-weighter binary sets HAProxy (or IPVS) server weights from measured load.
package main

import (
	"os"

	"github.com/haproxy-weighter/haproxy-weighter/cmd"
)

func main() { os.Exit(cmd.Execute()) }
