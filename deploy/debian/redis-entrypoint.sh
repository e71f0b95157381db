#!/bin/sh
# The official redis image is built with protected mode off: it serves a private network, and with
# it on, Redis refuses every client that is not on loopback. Turn it off the same way here.
set -eu
if [ "${1:-}" = redis-server ]; then
  shift
  set -- redis-server "$@" --protected-mode no
fi
exec "$@"
