"""The read-only web view of live stories: a :class:`~noveld.daemon.web.feed.StoryFeed` (the
running pipeline's, or a stored namespace's), the HTTP server of its page and JSON API, and
the page itself (``static/``: plain HTML, JS and CSS, no build step, nothing fetched from
elsewhere)."""
