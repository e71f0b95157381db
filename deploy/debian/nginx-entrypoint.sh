#!/bin/sh
# What ragmesh uses of the nginx image's entrypoint: render $NGINX_ENVSUBST_TEMPLATE_DIR/*.template
# into $NGINX_ENVSUBST_OUTPUT_DIR with envsubst, substituting only the variables whose names match
# $NGINX_ENVSUBST_FILTER (so nginx's own $variables pass through), then run the command.
set -eu
templates=${NGINX_ENVSUBST_TEMPLATE_DIR:-/etc/nginx/templates}
suffix=${NGINX_ENVSUBST_TEMPLATE_SUFFIX:-.template}
out=${NGINX_ENVSUBST_OUTPUT_DIR:-/etc/nginx/conf.d}
filter=${NGINX_ENVSUBST_FILTER:-}

if [ -d "$templates" ]; then
  if [ ! -w "$out" ]; then
    echo "$0: cannot write the rendered config to $out as uid $(id -u)" >&2
    exit 1
  fi
  defined=$(awk "END { for (name in ENVIRON) if (name ~ /$filter/) printf \"\${%s} \", name }" </dev/null)
  for template in "$templates"/*"$suffix"; do
    [ -f "$template" ] || continue
    target="$out/$(basename "$template" "$suffix")"
    envsubst "$defined" <"$template" >"$target"
    echo "$0: rendered $template to $target"
  done
fi
exec "$@"
