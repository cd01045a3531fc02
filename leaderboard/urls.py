from __future__ import annotations

from django.urls import path, re_path, register_converter

from leaderboard.views import board, compare, estimates, images, matrix, pages


class StoredTextConverter:
    """Any stored name, slashes and line breaks included: <path:> stops at a newline, so a row
    holding one (stored before the input rules) made every link to it a NoReverseMatch 500."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(StoredTextConverter, "text")
app_name = "leaderboard"

urlpatterns = [
    path("", board.landing, name="home"),
    path("leaderboard/", board.leaderboard, name="leaderboard"),
    re_path(r"^leaderboard/export\.(?P<fmt>csv|json|md)$", board.export, name="export"),
    path("leaderboard/feed.atom", board.feed, name="feed"),
    path("leaderboard/estimate/<int:pk>/<slug:hw>/", estimates.estimate_detail, name="estimate"),
    path("methodology/", board.methodology, name="methodology"),
    path("data/", board.data, name="data"),
    path("theme/", board.set_theme, name="theme"),
    path("stacks/<int:pk>/", pages.stack_detail, name="stack"),
    path("stacks/<int:pk>/share.png", images.stack_image, name="stack_image"),
    path("runs/<int:pk>/", pages.run_detail, name="run"),
    path("runs/<int:pk>/share.png", images.run_image, name="run_image"),
    path("compare/", compare.compare, name="compare"),
    path("compare/share.png", images.compare_image, name="compare_image"),
    path("models/<text:model_id>/", pages.model_detail, name="model"),
    # The class first: a model id may hold slashes, a class slug never does.
    path("matrix/export.csv", matrix.matrix_csv, name="matrix_csv"),
    path("matrix/<str:hw>/<text:model_id>/", matrix.matrix_page, name="matrix"),
    path("hardware/<int:pk>/", pages.hardware_detail, name="hardware"),
    # Imported authors and accounts have separate pages, so one can never merge into the
    # other (a username has no "/", so it never reaches the first pattern).
    path(
        "submitters/imported/<text:name>/",
        pages.imported_submitter_detail,
        name="imported_submitter",
    ),
    path("submitters/<str:username>/", pages.submitter_detail, name="submitter"),
]
