"""``/docs`` (Swagger UI) and ``/redoc`` served offline from the assets of the
``fastapi-offline`` package, behind the read key like every path but the health checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI

from slimvec.errors import ConfigError

__all__ = ["offline_docs", "DOCS_ASSETS", "DOCS_CSP"]

#: where the Swagger UI and ReDoc assets are served (behind the read key, as every path but
#: OPEN_PATHS)
DOCS_ASSETS = "/docs-assets"
#: what the docs pages may load from where: images, data, fonts only from this server
DOCS_CSP = "img-src 'self' data:; connect-src 'self'; font-src 'self' data:; frame-src 'none'"
#: the one outside URL in ReDoc 2's script (an image drawn on every page)
_REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
#: the files of ``fastapi_offline/static`` the pages load
_DOCS_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")


def offline_docs(app: FastAPI, read: Any) -> None:
    """``/docs`` (Swagger UI 5) and ``/redoc`` from the assets shipped by the ``fastapi-offline``
    package, mounted at :data:`DOCS_ASSETS`, so both render without internet. (Only its files are
    used; swagger-ui-bundle 1.1.0 ships Swagger UI 4, which refuses an OpenAPI 3.1 schema.)"""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.responses import HTMLResponse, Response
    from fastapi.staticfiles import StaticFiles

    from slimvec.extras import require

    package = require("serve", "fastapi_offline", "the offline /docs and /redoc pages")
    static = Path(str(package.__file__)).parent / "static"
    missing = [f for f in _DOCS_FILES if not (static / f).is_file()]
    if missing:
        raise ConfigError(f"The docs assets {missing} are missing from {static} (expected the "
                          "files of fastapi-offline 1.7): reinstall it with "
                          "pip install 'slimvec[serve]'.")
    # ReDoc always draws Redocly's logo from its CDN: the script is served with that image made
    # an empty data: URL (registered before the mount, so this route answers for the file)
    redoc_js = (static / "redoc.standalone.js").read_bytes().replace(_REDOC_LOGO, b"data:,")

    @app.get(f"{DOCS_ASSETS}/redoc.standalone.js", dependencies=[read], include_in_schema=False)
    def redoc_script() -> Response:
        return Response(redoc_js, media_type="text/javascript; charset=utf-8")

    app.mount(DOCS_ASSETS, StaticFiles(directory=str(static)), name="docs-assets")
    openapi = app.openapi_url or "/openapi.json"

    def offline(page: HTMLResponse) -> HTMLResponse:
        # the scripts still name outside hosts (ReDoc's logo on cdn.redoc.ly, Swagger UI's
        # validator badge): the browser may fetch images, data and fonts from this server only
        page.headers["Content-Security-Policy"] = DOCS_CSP
        return page

    @app.get("/docs", dependencies=[read], include_in_schema=False)
    def docs() -> HTMLResponse:
        from fastapi.openapi.docs import swagger_ui_default_parameters

        return offline(get_swagger_ui_html(
            openapi_url=openapi, title=f"{app.title} - API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            # no badge from validator.swagger.io (it would send it the schema's URL)
            swagger_ui_parameters={**swagger_ui_default_parameters, "validatorUrl": None}))

    @app.get("/redoc", dependencies=[read], include_in_schema=False)
    def redoc() -> HTMLResponse:
        return offline(get_redoc_html(openapi_url=openapi, title=f"{app.title} - ReDoc",
                                      redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
                                      redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png",
                                      with_google_fonts=False))
