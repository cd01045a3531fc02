"""Plumbing every app shares, at the bottom of the site: the API error shape, the 503/507
answers, throttles, the cache client and page-version invalidation, the security middlewares,
links, form rate limits and conditional GETs. It imports no app of the site."""
