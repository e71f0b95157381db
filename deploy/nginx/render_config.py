"""Render the ragmesh edge config into a folder that nginx runs from.

In the image, the nginx entrypoint renders ``templates/*.template`` with envsubst; this script does the
same substitution (and nothing else) so tests and operators can run the real config outside a container:

    python deploy/nginx/render_config.py /tmp/edge --gateway 127.0.0.1:8080 --listen 127.0.0.1:8088
    nginx -t -p /tmp/edge/ -c /tmp/edge/nginx.conf -e stderr

Only the variables below are substituted, exactly like the image's NGINX_ENVSUBST_FILTER, so nginx's
own ``$variables`` pass through untouched.
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

NGINX_DIR = Path(__file__).resolve().parent

# Name -> value the image uses (see the edge target in deploy/Dockerfile).
IMAGE_DEFAULTS = {
    "GATEWAY_UPSTREAM": "gateway:8080",
    "GATEWAY_UPSTREAM_OPTIONS": "resolve",
    "NGINX_RESOLVER": "127.0.0.11",
    "NGINX_LISTEN": "8080",
    "NGINX_STATIC_ROOT": "/usr/share/nginx/html",
}
TEMPLATE_VARIABLE = re.compile(r"\$\{([A-Z][A-Z0-9_]*)\}")

# Used only where the machine has no /etc/nginx/mime.types (the image always has one).
_MINIMAL_MIME_TYPES = """types {
    text/html html;
    text/css css;
    application/javascript js mjs;
    application/json json;
    image/svg+xml svg;
    image/png png;
    font/woff2 woff2;
}
"""


def render_template(text: str, values: dict[str, str]) -> str:
    """Substitute ``${NAME}`` for the known variables; any other ``${...}`` is an error."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"template variable {name} has no value")
        return values[name]

    return TEMPLATE_VARIABLE.sub(substitute, text)


def render(out_dir: Path, **overrides: str) -> Path:
    """Write nginx.conf, snippets/, sites/ and mime.types into ``out_dir``; returns nginx.conf's path.

    ``overrides`` replace IMAGE_DEFAULTS entries by name (e.g. ``GATEWAY_UPSTREAM="127.0.0.1:8080"``).
    """
    unknown = set(overrides) - set(IMAGE_DEFAULTS)
    if unknown:
        raise KeyError(f"unknown template variables: {sorted(unknown)}")
    values = {**IMAGE_DEFAULTS, **overrides}
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(NGINX_DIR / "nginx.conf", out_dir / "nginx.conf")
    shutil.copytree(NGINX_DIR / "snippets", out_dir / "snippets", dirs_exist_ok=True)
    sites = out_dir / "sites"
    sites.mkdir(exist_ok=True)
    for template in sorted((NGINX_DIR / "templates").glob("*.template")):
        rendered = render_template(template.read_text(encoding="utf-8"), values)
        (sites / template.name.removesuffix(".template")).write_text(rendered, encoding="utf-8")
    system_mime_types = Path("/etc/nginx/mime.types")
    if system_mime_types.is_file():
        shutil.copyfile(system_mime_types, out_dir / "mime.types")
    else:
        (out_dir / "mime.types").write_text(_MINIMAL_MIME_TYPES, encoding="utf-8")
    return out_dir / "nginx.conf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the rendered config into")
    parser.add_argument("--gateway", default="127.0.0.1:8080", help="gateway host:port")
    parser.add_argument("--listen", default="127.0.0.1:8088", help="nginx listen address")
    parser.add_argument("--static-root", default=str(NGINX_DIR / "html"), help="folder holding widget/")
    args = parser.parse_args()
    conf = render(
        args.out_dir,
        GATEWAY_UPSTREAM=args.gateway,
        GATEWAY_UPSTREAM_OPTIONS="",
        NGINX_RESOLVER="127.0.0.1",
        NGINX_LISTEN=args.listen,
        NGINX_STATIC_ROOT=args.static_root,
    )
    print(f"nginx -p {args.out_dir.resolve()}/ -c {conf.resolve()} -e stderr -g 'daemon off;'")


if __name__ == "__main__":
    main()
