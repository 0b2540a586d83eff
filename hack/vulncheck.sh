#!/usr/bin/env bash
# Runs govulncheck over every package of the module against the Go vulnerability database, read
# from the golang.org/x/vulndb module (the reports the database at vuln.go.dev is generated from)
# through the Go module proxy, so no other host is needed. The database is built from that
# module with its own generator (cmd/gendb) into a temporary directory and passed as -db file://.
#
#   VULNDB_VERSION      the golang.org/x/vulndb version (default: pinned below, so CI is
#                       reproducible; "latest" asks the proxy for the newest)
#   GOVULNCHECK_VERSION the golang.org/x/vuln version that provides govulncheck
#
# govulncheck reports only vulnerabilities whose symbols the code can reach, and exits 3 when
# it finds any; standard-library findings depend on the toolchain (the Makefile's GOTOOLCHAIN).
set -euo pipefail
cd "$(dirname "$0")/.."
go="${GO:-go}"
vulndb="${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
govulncheck="${GOVULNCHECK_VERSION:-v1.9.0}"

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# Download outside this module so its go.mod and go.sum are untouched.
src="$(cd "$work" && GOFLAGS=-mod=mod "$go" mod download -json "golang.org/x/vulndb@$vulndb" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
if [ -z "$src" ] || [ ! -d "$src/data/osv" ]; then
  echo "vulncheck: golang.org/x/vulndb@$vulndb: no data/osv in the downloaded module" >&2
  exit 1
fi
# gendb reads the reports from a git repository (it dates each entry from the history).
cp -r "$src" "$work/vulndb"
chmod -R u+w "$work/vulndb"
(
  cd "$work/vulndb"
  git init -q
  git add -A
  git -c user.name=vulncheck -c user.email=vulncheck@localhost commit -q -m "golang.org/x/vulndb@$vulndb"
  "$go" run ./cmd/gendb -repo . -out "$work/db"
)
echo "vulncheck: golang.org/x/vulndb@$vulndb ($(ls "$work/db/ID" | grep -c "\.json$") entries), govulncheck $govulncheck, $("$go" env GOVERSION)"
"$go" run "golang.org/x/vuln/cmd/govulncheck@$govulncheck" -db "file://$work/db" ./...
