from __future__ import annotations

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchloop_site.settings")
application = get_wsgi_application()
# What the process loaded to start (Django, the apps, their modules) lives as long as it does:
# left out of the collector's full passes, which otherwise walk it all (a 47 ms pause in a cold
# board at 1,000,000 runs, 11-14 ms with it frozen; bench/README.md).
gc.freeze()
