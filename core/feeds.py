"""The Atom writer every feed uses (the public site's and the lab's), well-formed whatever a
stored row or the query string holds."""

from __future__ import annotations

import re
from collections.abc import Mapping
from xml.sax.xmlreader import AttributesImpl

from django.utils.feedgenerator import Atom1Feed
from django.utils.xmlutils import SimplerXMLGenerator

# XML 1.0's Char production, negated.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: str) -> str:
    """`value` with what XML 1.0 cannot hold (control characters, U+FFFE/U+FFFF, surrogates)
    replaced by U+FFFD, for feeds: a row stored before the input rules must not end a feed."""
    return _NOT_XML.sub("\ufffd", value)


class _XmlSafeGenerator(SimplerXMLGenerator):
    """Text and attribute values with what XML 1.0 cannot hold replaced (xml_text):
    Django's generator raises on a control character, which made the whole feed a 500."""

    def characters(self, content: str) -> None:
        super().characters(xml_text(content) if content else content)

    def startElement(  # noqa: N802 (SAX's name)
        self, name: str, attrs: AttributesImpl[str] | Mapping[str, object] | None
    ) -> None:
        # Django's feeds pass plain dicts; SAX's signature (and the stubs) say AttributesImpl,
        # which is what is passed on.
        safe = {key: xml_text(str(value)) for key, value in (attrs or {}).items()}
        super().startElement(name, AttributesImpl(safe))


class XmlSafeAtomFeed(Atom1Feed):
    """An Atom feed that stays well-formed whatever a stored row or the query string holds."""

    def write(self, outfile, encoding: str) -> None:
        # Atom1Feed.write, with the generator above.
        handler = _XmlSafeGenerator(outfile, encoding, short_empty_elements=True)
        handler.startDocument()
        handler.startElement("feed", self.root_attributes())
        self.add_root_elements(handler)
        self.write_items(handler)
        handler.endElement("feed")
