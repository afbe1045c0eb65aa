# listening.sh: sourced by examples/demo.sh and tests/examples.test.sh (bash).
# listening PORT: true when a TCP socket listens on PORT; reads /proc/net/tcp*, starts nothing,
# so a caller can wait for a server with a bounded loop instead of a blind sleep.
listening() { # PORT: a socket listens on it (reads /proc/net/tcp*, no process started)
    local want f _ addr st
    printf -v want ':%04X' "$1"
    for f in /proc/net/tcp /proc/net/tcp6; do
        while read -r _ addr _ st _; do [[ $addr == *"$want" && $st == 0A ]] && return 0; done <"$f"
    done
    return 1
}
