#!/usr/bin/env bash
# Shared helpers for the hack/ scripts. Source it; it defines functions only.

# module_dir <module path> prints the directory of <module path> in the module
# cache, at the version the go.mod of the current directory selects, after
# downloading it. `go list -m -f '{{.Dir}}'` alone prints an empty line for a
# module that is required but not yet downloaded (a fresh machine, an empty
# GOMODCACHE), so every script that reads files out of the module cache goes
# through here. Fails, naming the module, when the directory cannot be had.
module_dir() {
    local mod=$1 dir
    "${GO:-go}" mod download "${mod}" || { echo "error: go mod download ${mod} failed" >&2; return 1; }
    dir="$("${GO:-go}" list -m -f '{{.Dir}}' "${mod}")"
    if [[ -z "${dir}" || ! -d "${dir}" ]]; then
        echo "error: ${mod} has no directory in the module cache after go mod download" >&2
        return 1
    fi
    echo "${dir}"
}

# build_lock <lock file> <script name> holds an exclusive flock(1) on <lock file> until the
# calling script exits (the descriptor stays open in it and its children), so two builds of the
# same outputs run one after the other and the second finds the first's outputs up to date:
# `make test` while .ci/run builds the real node in the background, or `make test-e2e` while
# `make run`'s real node builds. It says when it waits.
build_lock() {
    local file=$1 name=$2
    mkdir -p "$(dirname "${file}")"
    exec {build_lock_fd}>"${file}"
    if ! flock -n "${build_lock_fd}"; then
        echo "${name}: waiting for another build holding ${file}"
        flock "${build_lock_fd}"
    fi
}
