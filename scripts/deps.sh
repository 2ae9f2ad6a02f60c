# Installs what the product needs at run time (sourced by the other scripts).
# shellcheck shell=bash

# The Debian mirror this machine already uses, read from its apt sources:
# nothing about hosts is written in this repository.
debian_mirror() {
    local f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri=$(awk '
            /^URIs:/ { u = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+(-updates)?$/) s = 1 }
            /^$/ { if (u != "" && s && !done) { print u; done = 1 } u = ""; s = 0 }
            END { if (u != "" && s && !done) print u }' "$f")
        [ -n "$uri" ] && { echo "$uri"; return 0; }
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        uri=$(awk '$1 == "deb" && $3 !~ /security/ && $2 ~ /debian/ { print $2; exit }' "$f")
        [ -n "$uri" ] && { echo "$uri"; return 0; }
    done
    return 1
}

# qemu-system-x86 must come from backports, to match the preinstalled qemu-utils.
ensure_qemu() {
    command -v qemu-system-x86_64 >/dev/null && return 0
    local codename mirror list=/etc/apt/sources.list.d/vmaas-backports.sources
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    if [ ! -f "$list" ]; then
        mirror=$(debian_mirror) || die "cannot find this machine's Debian mirror in /etc/apt/sources.list*"
        log "adding ${codename}-backports from $mirror"
        printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$mirror" "$codename" | as_root tee "$list" >/dev/null
        APT_UPDATED=
    fi
    if [ -z "$APT_UPDATED" ]; then as_root apt-get update -qq >/dev/null; APT_UPDATED=1; fi
    log "installing qemu-system-x86 from ${codename}-backports"
    as_root apt-get install -y -qq --no-install-recommends -t "${codename}-backports" qemu-system-x86 >/dev/null
}

# Node.js and npm install the web page's pinned front-end packages at build
# time (server/build.rs runs `npm ci` in web/); the machine's own if it has them.
ensure_npm() {
    command -v npm >/dev/null || apt_install nodejs npm
}

ensure_runtime_deps() {
    apt_install curl ca-certificates
    ensure_qemu
    apt_install qemu-utils
    # EFI firmware (OVMF, with Secure Boot) and a software TPM 2.0 for guest
    # profiles that ask for them.
    apt_install ovmf swtpm swtpm-tools
    ensure_npm
}
