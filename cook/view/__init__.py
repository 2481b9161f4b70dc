"""A cooked pack or a dataset's stats -> one self-contained HTML page (``cook inspect --html``,
``cook stats --html``).

    Pack (+ tokens view) -> pack_page.render_pack_page -> str   (media drawn back out of the pack)
    stats summary (+ plot PNG) -> stats_page.render_stats_page -> str

Everything is inline (CSS, images as ``data:`` URIs), nothing is fetched and there is no script: the page
opens offline in any browser. Every piece of data text goes through ``html.escape``. Imports L0 only
(``cook.packfiles`` for pack reading and media arithmetic).
"""
