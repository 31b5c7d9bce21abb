"""One router per page of the app (and the JSON that goes with it), included by ``csparql.web.app`` in this
order: ``static``, ``overview``, ``query``, ``streams``, ``editor``, ``actions``."""
