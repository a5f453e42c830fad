// Command registry is the CNCF distribution registry's main at the version pinned in go.mod, with
// only what the test bed uses: filesystem and in-memory storage, and htpasswd authentication. The
// upstream command also links the cloud storage drivers (S3, GCS, Azure), whose SDKs would triple
// the build.
//
// `registry htpasswd USER` reads a password on stdin and prints an htpasswd line for it (bcrypt,
// the registry's own library, at the lowest cost: test passwords protect nothing).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"golang.org/x/crypto/bcrypt"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "htpasswd" {
		password, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil && password == "" {
			fmt.Fprintln(os.Stderr, "registry htpasswd: no password on stdin")
			os.Exit(1)
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(strings.TrimRight(password, "\r\n")), bcrypt.MinCost)
		if err != nil {
			fmt.Fprintln(os.Stderr, "registry htpasswd:", err)
			os.Exit(1)
		}
		fmt.Printf("%s:%s\n", os.Args[2], hash)
		return
	}
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
