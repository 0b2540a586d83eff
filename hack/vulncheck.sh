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
# govulncheck reports only vulnerabilities whose symbols the code can reach; when it finds any
# the script fails (govulncheck exits 3, `go run` passes that on as 1). Standard-library findings
# depend on the toolchain in force (the Makefile's GOTOOLCHAIN and go.mod's toolchain line).
# gendb dates every entry from the one synthetic commit, so `published`/`modified` in
# govulncheck's -json output are the time of the run.
set -euo pipefail
cd "$(dirname "$0")/.."
go="${GO:-go}"
vulndb="${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
govulncheck="${GOVULNCHECK_VERSION:-v1.9.0}"
# The database must hold at least this many reports (the pinned version has 4,789): a download
# or generation that yields fewer fails here instead of passing against an empty database.
min_entries=4000

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# Download outside this module so its go.mod and go.sum are untouched. The go command writes a
# download's error into the JSON, so that is where it is read from.
field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" "$work/download.json"; }
if ! (cd "$work" && GOFLAGS=-mod=mod "$go" mod download -json "golang.org/x/vulndb@$vulndb" >"$work/download.json"); then
  echo "vulncheck: go mod download golang.org/x/vulndb@$vulndb failed: $(field Error)" >&2
  exit 1
fi
src="$(field Dir)"
resolved="$(field Version)"
if [ -z "$src" ] || [ ! -d "$src/data/osv" ]; then
  echo "vulncheck: golang.org/x/vulndb@$vulndb: no data/osv in the downloaded module" >&2
  exit 1
fi
# gendb reads the reports from a git repository (it dates each entry from the history). The
# user's git configuration is kept out: commit signing or hooks must not touch this commit.
cp -r "$src" "$work/vulndb"
chmod -R u+w "$work/vulndb"
(
  cd "$work/vulndb"
  export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
  git init -q
  git add -A
  git -c user.name=vulncheck -c user.email=vulncheck@localhost -c commit.gpgsign=false \
    -c core.hooksPath=/dev/null commit -q --no-verify -m "golang.org/x/vulndb@$resolved"
  "$go" run ./cmd/gendb -repo . -out "$work/db"
)
entries="$(find "$work/db/ID" -maxdepth 1 -name '*.json' 2>/dev/null | wc -l)"
if [ "$entries" -lt "$min_entries" ]; then
  echo "vulncheck: the database built from golang.org/x/vulndb@$resolved has $entries entries, want at least $min_entries" >&2
  exit 1
fi
echo "vulncheck: golang.org/x/vulndb@$resolved ($entries entries), govulncheck $govulncheck, $("$go" env GOVERSION)"
"$go" run "golang.org/x/vuln/cmd/govulncheck@$govulncheck" -db "file://$work/db" ./...
