"""Writes wordnet-glosses.txt: one line per WordNet 3.0 synset, "lemma, lemma: definition" (up to
three lemmas, underscores as spaces, the gloss up to its first ';', examples dropped), distinct
lines in sorted order. Reads Debian's wordnet-base (/usr/share/wordnet/data.*)."""
import os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
if not os.path.exists("/usr/share/wordnet/data.noun"):
    sys.exit("WordNet 3.0 is not installed: apt install wordnet-base (Debian, Ubuntu)")
lines = set()
for pos in ("noun", "verb", "adj", "adv"):
    for line in open(f"/usr/share/wordnet/data.{pos}", encoding="latin-1"):
        if line.startswith("  "):  # the license header
            continue
        head, _, gloss = line.partition(" | ")
        fields = head.split()
        count = int(fields[3], 16)
        lemmas = [re.sub(r"\(.*\)$", "", fields[4 + 2 * i]).replace("_", " ") for i in range(count)]
        definition = gloss.split(";")[0].strip().strip('"').strip()
        if definition:
            lines.add(f"{', '.join(lemmas[:3])}: {definition}")
with open(f"{here}/wordnet-glosses.txt", "w", encoding="utf-8") as out:
    out.write("\n".join(sorted(lines)) + "\n")
