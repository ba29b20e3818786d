"""Generate made-up multi-session conversations with question → evidence labels, in LoCoMo's JSON
layout, to train the embedder tuning and the evidence reranker on data Mirador owns. Prints one JSON
summary; writes the conversations with --out.

Why: the bundled tuning and reranker ship in an Apache-2.0 app, so what they learn from must allow
that. LoCoMo (CC BY-NC 4.0) stays an evaluation set. Everything here -- names, facts, phrasings,
questions -- is written for Mirador in this file; no LoCoMo text, speaker or question is reused.
The output is a pure function of --seed and --convs (Python's random.Random, no other input), so
the training data need not be kept: run this again.

What it imitates is the shape of the task, not LoCoMo's content: two people chatting over many
dated sessions; a fact said once, in passing, in the first person ("we brought home a beagle"),
asked about later in other words and by the speaker's name ("What kind of dog does Priya have?");
facts spread over several sessions and asked together (multi-hop, category 1); "when did ..."
questions whose answer is a relative date in a dated session (temporal, 2); questions that need a
small inference (open-domain, 3); one-turn facts (single-hop, 4). Replies that repeat the topic
("A beagle? So cute!") and small talk are the hard negatives.

    .venv/bin/python bench/synth_conversations.py --out /tmp/synth.json [--seed 7] [--convs 8]
    .venv/bin/python bench/train_embedder.py --data /tmp/synth.json --out models/data/embedder_tuning.npz
    .venv/bin/python bench/train_reranker.py --data /tmp/synth.json --out memory/retrieval/data/evidence_reranker.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

NAMES = ["Priya", "Tomasz", "Ines", "Kwame", "Lena", "Mateo", "Yuki", "Farah", "Oskar", "Amara", "Dmitri",
         "Rosa", "Idris", "Hanna", "Felipe", "Noor", "Bram", "Chiara", "Kofi", "Marisol", "Arjun", "Sigrid",
         "Tariq", "Elodie", "Ravi", "Wren", "Emeka", "Lucia", "Henrik", "Soraya", "Pablo", "Mei", "Anders",
         "Leilani", "Viktor", "Ayesha", "Teodor", "Nadia", "Cormac", "Zainab"]

# Each kind of fact: items (with the words said about them), what the speaker says (first person),
# what the friend answers (shares the topic: a hard negative), and how a question asks about it (by
# the speaker's name, in other words). {i} is the item's main phrase; other fields by name.
PETS = [
    {"i": "beagle", "kind": "dog", "detail": "he howls at the vacuum"},
    {"i": "corgi puppy", "kind": "dog", "detail": "her little legs are hilarious"},
    {"i": "rescue greyhound", "kind": "dog", "detail": "she sleeps twenty hours a day"},
    {"i": "black labrador", "kind": "dog", "detail": "he already knows sit and paw"},
    {"i": "tabby kitten", "kind": "cat", "detail": "she attacks my shoelaces"},
    {"i": "grey Maine Coon", "kind": "cat", "detail": "he is enormous and very gentle"},
    {"i": "pair of budgies", "kind": "bird", "detail": "they chirp the whole morning"},
    {"i": "lop-eared rabbit", "kind": "rabbit", "detail": "he chews every cable he finds"},
    {"i": "bearded dragon", "kind": "lizard", "detail": "she basks under her lamp all day"},
    {"i": "two guinea pigs", "kind": "guinea pig", "detail": "they squeak when the fridge opens"},
    {"i": "old tortoise", "kind": "tortoise", "detail": "he is older than I am"},
]
PET_NAMES = ["Pickle", "Juniper", "Mochi", "Biscuit", "Pepper", "Olive", "Waffles", "Nutmeg", "Ziggy", "Clementine",
             "Bean", "Tofu", "Marble", "Rocket", "Sprout"]
HOBBIES = [
    {"i": "pottery", "ing": "throwing bowls on the wheel", "thing": "a wonky mug", "field": "arts and crafts",
     "gift": "a set of clay sculpting tools"},
    {"i": "bouldering", "ing": "climbing at the bouldering gym", "thing": "my first V3 route", "field": "climbing",
     "gift": "a chalk bag"},
    {"i": "watercolour", "ing": "painting watercolour landscapes", "thing": "a foggy harbour scene", "field": "painting",
     "gift": "a travel paint set"},
    {"i": "woodworking", "ing": "building furniture in the garage", "thing": "a walnut side table", "field": "carpentry",
     "gift": "a set of chisels"},
    {"i": "knitting", "ing": "knitting in the evenings", "thing": "a striped scarf", "field": "needlework",
     "gift": "merino yarn"},
    {"i": "birdwatching", "ing": "watching birds at the marsh", "thing": "a kingfisher", "field": "nature",
     "gift": "binoculars"},
    {"i": "sourdough baking", "ing": "baking bread every weekend", "thing": "a loaf with a huge crumb",
     "field": "baking", "gift": "a proofing basket"},
    {"i": "salsa dancing", "ing": "dancing salsa on Thursday nights", "thing": "a spin I finally nailed",
     "field": "dance", "gift": "dance shoes"},
    {"i": "chess", "ing": "playing chess at the club", "thing": "a win against the club champion",
     "field": "board games", "gift": "a wooden chess set"},
    {"i": "gardening", "ing": "working in the vegetable patch", "thing": "the first tomatoes of the year",
     "field": "gardening", "gift": "a pair of pruning shears"},
    {"i": "kayaking", "ing": "paddling on the lake", "thing": "a heron right next to the boat",
     "field": "water sports", "gift": "a dry bag"},
    {"i": "film photography", "ing": "shooting film with my old camera", "thing": "a roll of street portraits",
     "field": "photography", "gift": "a few rolls of film"},
    {"i": "calligraphy", "ing": "practising brush lettering", "thing": "a birthday card for my aunt",
     "field": "lettering", "gift": "a fountain pen"},
    {"i": "trail running", "ing": "running the forest trails", "thing": "a twelve-mile loop", "field": "running",
     "gift": "trail shoes"},
    {"i": "astronomy", "ing": "looking at the stars with my telescope", "thing": "the rings of Saturn",
     "field": "science", "gift": "a star chart"},
]
INSTRUMENTS = ["guitar", "violin", "piano", "cello", "drums", "ukulele", "flute", "saxophone", "trumpet", "banjo",
               "harmonica", "bass guitar"]
JOBS = [
    {"i": "nurse", "where": "the children's hospital", "task": "twelve-hour night shifts on the ward"},
    {"i": "primary school teacher", "where": "a school across town", "task": "grading thirty spelling tests"},
    {"i": "software developer", "where": "a small startup", "task": "fixing a bug that took down the app"},
    {"i": "carpenter", "where": "a renovation company", "task": "fitting kitchen cabinets all day"},
    {"i": "pastry chef", "where": "a French bakery", "task": "laminating dough at four in the morning"},
    {"i": "accountant", "where": "a firm downtown", "task": "closing the quarter's books"},
    {"i": "veterinarian", "where": "an animal clinic", "task": "vaccinating a whole litter of puppies"},
    {"i": "graphic designer", "where": "an ad agency", "task": "redoing a logo for the fifth time"},
    {"i": "firefighter", "where": "the station on Elm Road", "task": "running drills in full gear"},
    {"i": "librarian", "where": "the public library", "task": "running the children's reading hour"},
    {"i": "physiotherapist", "where": "a sports clinic", "task": "helping a runner recover from a knee injury"},
    {"i": "electrician", "where": "a building contractor", "task": "rewiring an old farmhouse"},
]
PLACES = [
    {"i": "Lisbon", "sight": "the tiles on every building", "country": "Portugal"},
    {"i": "Kyoto", "sight": "the temple gardens", "country": "Japan"},
    {"i": "Oaxaca", "sight": "the market food", "country": "Mexico"},
    {"i": "Reykjavik", "sight": "the hot springs", "country": "Iceland"},
    {"i": "Marrakesh", "sight": "the spice souks", "country": "Morocco"},
    {"i": "Vancouver", "sight": "the mountains right behind the city", "country": "Canada"},
    {"i": "Tbilisi", "sight": "the sulphur baths", "country": "Georgia"},
    {"i": "Hanoi", "sight": "the street food at night", "country": "Vietnam"},
    {"i": "Cape Town", "sight": "the view from Table Mountain", "country": "South Africa"},
    {"i": "Edinburgh", "sight": "the castle on the hill", "country": "Scotland"},
    {"i": "Seville", "sight": "the orange trees everywhere", "country": "Spain"},
    {"i": "Krakow", "sight": "the old town square", "country": "Poland"},
    {"i": "Queenstown", "sight": "the lakes", "country": "New Zealand"},
    {"i": "Istanbul", "sight": "the ferries on the Bosphorus", "country": "Turkey"},
]
DISHES = [
    {"i": "a pot of lentil dal", "cuisine": "Indian"}, {"i": "homemade ramen", "cuisine": "Japanese"},
    {"i": "a big paella", "cuisine": "Spanish"}, {"i": "pierogi from scratch", "cuisine": "Polish"},
    {"i": "a green curry", "cuisine": "Thai"}, {"i": "fresh tagliatelle", "cuisine": "Italian"},
    {"i": "jollof rice", "cuisine": "West African"}, {"i": "a lamb tagine", "cuisine": "Moroccan"},
    {"i": "tamales", "cuisine": "Mexican"}, {"i": "kimchi fried rice", "cuisine": "Korean"},
]
BOOK_A = ["Silent", "Copper", "Distant", "Hollow", "Northern", "Paper", "Salt", "Winter", "Glass", "Crooked"]
BOOK_B = ["Orchard", "Lighthouse", "Atlas", "Kingdom", "River", "Garden", "Harbour", "Archive", "Mountain", "Clock"]
AUTHORS = ["Ada Whitlow", "Marcus Penhale", "Ilse Varga", "Teo Marchetti", "Grace Obi", "Soren Lind"]
GENRES = ["mystery", "fantasy", "science fiction", "historical", "thriller", "romance"]
EVENTS = [  # (what was done, as said; as asked)
    ("ran a charity 10k for the food bank", "run the charity race"),
    ("went to a jazz concert in the park", "go to the jazz concert"),
    ("visited my grandmother at her farm", "visit their grandmother"),
    ("took a first-aid course at the community centre", "take the first-aid course"),
    ("had a job interview at a design studio", "have the job interview"),
    ("moved into a new flat near the river", "move into the new flat"),
    ("went camping by the lake with friends", "go camping"),
    ("hosted a dinner party for the neighbours", "host the dinner party"),
    ("volunteered at the animal shelter", "volunteer at the animal shelter"),
    ("took a road trip along the coast", "take the road trip along the coast"),
    ("got my driving licence", "get their driving licence"),
    ("went to my cousin's wedding", "go to their cousin's wedding"),
    ("gave a talk at a local meetup", "give a talk at the meetup"),
    ("signed up for a pottery workshop", "sign up for a workshop"),
    ("went to a protest about the new motorway", "go to the protest"),
    ("planted an apple tree in the garden", "plant the apple tree"),
    ("broke my wrist falling off my bike", "break their wrist"),
    ("adopted a stray cat from the street", "adopt the stray cat"),
    ("finished my first marathon", "finish the marathon"),
    ("bought a second-hand piano", "buy the piano"),
]
WHEN = [("yesterday", 1), ("last weekend", 7), ("two days ago", 2), ("last week", 7), ("this morning", 0),
        ("last Friday", 5), ("a few days ago", 3), ("last month", 30)]
GOALS = [
    ("open my own bakery", "open a bakery"), ("go back to university for a nursing degree", "study nursing"),
    ("buy a small house with a garden", "buy a house"), ("walk the whole Camino trail", "walk the Camino"),
    ("start a community garden on our street", "start a community garden"),
    ("write a children's book", "write a children's book"), ("learn Japanese properly", "learn Japanese"),
    ("run an ultramarathon", "run an ultramarathon"), ("foster dogs from the shelter", "foster dogs"),
]
CAUSES = [("the food bank", "fighting hunger"), ("a literacy charity", "children's reading"),
          ("the beach clean-up group", "the environment"), ("a refugee support centre", "helping refugees"),
          ("the animal rescue", "animal welfare"), ("a youth football club", "kids' sport")]
KIDS = ["Ella", "Theo", "Maya", "Jonah", "Iris", "Leo", "Ruby", "Otto", "Alma", "Finn"]

SMALL_TALK = ["Hey {o}! Long time no talk, how have you been?", "Hi {o}! So good to hear from you.",
              "Things have been busy but good, thanks for asking.", "Honestly, just trying to rest this week.",
              "Haha, that is so you.", "Oh wow, that sounds amazing!", "I totally get that.",
              "That's great to hear, I'm happy for you.", "Work has been a lot lately, but I'm hanging in there.",
              "The weather has been awful here, rain every day.", "Talk soon, take care of yourself!",
              "Bye {o}, let's catch up again soon!", "Same here, it's been a long week.",
              "Thanks, {o}, that means a lot.", "Anyway, enough about me. What's new with you?",
              "I've been sleeping badly, too much coffee probably.", "You always know how to cheer me up.",
              "Yeah, life just keeps going, doesn't it?", "Oh no, I hope it gets better soon.",
              "Let me know how it goes!", "Ha! I can picture it.", "Good luck with everything this week."]
CAPTIONS = {"pet": "a photo of a {i} on a sofa", "hobby": "a photo of {thing}", "place": "a photo of {sight}",
            "dish": "a photo of {i} on a table", "job": "a photo of a busy workplace"}


def fill(t: str, **kw) -> str:
    return t.format(**kw)


def facts(rng: random.Random, me: str, other: str) -> list[dict]:
    """The facts one speaker tells over the conversation: each a list of turns (said by `me`, one
    or more sessions) with the questions that ask about them. A fact is
    {"says": [text, ...], "reply": [text, ...] per say, "caption": [str|None], "qs": [(q, cat, [say index])]}."""
    out = []
    p = me

    # pets: one or two, single-hop each, multi-hop together
    pets = rng.sample(PETS, rng.choice([1, 2]))
    names = rng.sample(PET_NAMES, len(pets))
    pet_says = []
    for pet, name in zip(pets, names, strict=True):
        say = rng.choice([
            "We finally brought home a {i} from the shelter, we named {n}, and {d}!",
            "Meet {n}, my new {i}. {D}.", "Guess what, I adopted a {i}! {n} has already taken over the couch.",
            "Update on {n}, the {i}: {d}. I'm completely in love.",
        ]).format(i=pet["i"], n=name, d=pet["detail"], D=pet["detail"].capitalize())
        pet_says.append(say)
        # A question with one answer: the generic ones only when there is one pet (else the others
        # would be unlabelled evidence).
        qs = [(rng.choice(["What kind of {k} does {p} have?"] + (["What pet did {p} adopt?",
                           "What animal did {p} bring home?"] if len(pets) == 1 else [])).format(k=pet["kind"], p=p), 4),
              (rng.choice(["What is the name of {p}'s {k}?", "What did {p} name the {k}?"]).format(k=pet["kind"], p=p), 4)]
        out.append({"says": [say], "reply": [rng.choice([f"Aww, a {pet['i']}! Send me more pictures of {name}.",
                                                         f"{name} is the perfect name! How is the {pet['kind']} settling in?",
                                                         f"No way! I've always wanted a {pet['kind']}."])],
                    "caption": [CAPTIONS["pet"].format(i=pet["i"]) if rng.random() < 0.3 else None],
                    "qs": [(q, c, [0]) for q, c in qs], "kind": "pet"})
    if len(pets) > 1:
        out.append({"multi": [len(out) - 2, len(out) - 1],
                    "qs": [(rng.choice(["What pets does {p} have?", "Which animals live with {p}?"]).format(p=p), 1)]})

    # hobbies: two or three, each said in its own session; asked one by one and together
    hobbies = rng.sample(HOBBIES, rng.choice([2, 3]))
    first = len(out)
    for h in hobbies:
        say = rng.choice([
            "I finally tried {i} this week and I'm hooked, I made {thing}!",
            "Spent all of Saturday {ing}. Look, {thing}!",
            "Lately I've been {ing} whenever I can, it clears my head.",
            "My {i} class was great tonight, I managed {thing}.",
        ]).format(**h)
        qs = [(rng.choice(["What new hobby has {p} picked up?", "What does {p} do to unwind?",
                           "What activity did {p} start recently?", "What class is {p} taking?"]).format(p=p), 4)
              ][: len(hobbies) == 1] + [
              (rng.choice(["What did {p} make or achieve in their {i}?", "What did {p} show off from {ing2}?"])
               .format(p=p, i=h["i"], ing2=h["i"]), 4)]
        if rng.random() < 0.4:
            qs.append((rng.choice(["Would {p} appreciate {gift} as a present?", "Is {p} likely interested in {field}?",
                                   "What gift might {p} like for their birthday?"]).format(p=p, **h), 3))
        out.append({"says": [say], "reply": [rng.choice([f"{h['i'].capitalize()}? I didn't know you were into that!",
                                                         "That's so cool, I'd love to try it with you sometime.",
                                                         f"Wow, {h['thing']}? You're a natural."])],
                    "caption": [CAPTIONS["hobby"].format(thing=h["thing"]) if rng.random() < 0.3 else None],
                    "qs": [(q, c, [0]) for q, c in qs], "kind": "hobby"})
    out.append({"multi": list(range(first, len(out))),
                "qs": [(rng.choice(["What hobbies does {p} have?", "What activities does {p} enjoy in their free time?",
                                    "What does {p} like to do for fun?"]).format(p=p), 1)]})

    # instruments: one or two
    inst = rng.sample(INSTRUMENTS, rng.choice([0, 1, 2]))
    first = len(out)
    for x in inst:
        say = rng.choice(["I've been practising the {x} every night, my neighbours must love me.",
                          "Picked up my old {x} again after years, my fingers remember more than I thought.",
                          "Our band needs someone on {x}, so guess who volunteered!"]).format(x=x)
        out.append({"says": [say], "reply": [rng.choice(["Ha, I'd pay to hear that.", f"The {x}? Play me something next time!"])],
                    "caption": [None],
                    "qs": [(rng.choice(["What instrument does {p} play?", "What musical instrument is {p} learning?"])
                            .format(p=p), 4, [0])][: len(inst) == 1], "kind": "music"})
    if len(inst) > 1:
        out.append({"multi": list(range(first, len(out))),
                    "qs": [("What instruments does {p} play?".format(p=p), 1)]})

    # job: started, then a later day at work
    job = rng.choice(JOBS)
    s1 = rng.choice(["Big news: I start as a {i} at {where} on Monday!", "I got the job! I'm going to be a {i} at {where}.",
                     "First week as a {i} done, {where} is chaotic but I love it."]).format(**job)
    s2 = rng.choice(["Exhausting day, {task}.", "Work was wild today, {task}.", "I spent the whole day {task}, I'm done."]).format(**job)
    out.append({"says": [s1, s2], "reply": ["Congratulations! You deserve it.", "Oof, get some rest tonight."],
                "caption": [None, CAPTIONS["job"] if rng.random() < 0.2 else None],
                "qs": [(rng.choice(["What is {p}'s job?", "What does {p} do for a living?", "What is {p}'s profession?"])
                        .format(p=p), 4, [0]),
                       (rng.choice(["Where does {p} work?", "Where did {p} get hired?"]).format(p=p), 4, [0]),
                       (rng.choice(["What was hard about {p}'s day at work?", "What did {p} do at work that tired them out?"])
                        .format(p=p), 4, [1]),
                       (rng.choice(["What field does {p} work in, and what is a typical day like?"]).format(p=p), 1, [0, 1])],
                "kind": "job"})

    # travel: one to three places, with temporal questions
    places = rng.sample(PLACES, rng.choice([1, 2, 3]))
    first = len(out)
    for pl in places:
        rel, _ = rng.choice(WHEN[:6])
        say = rng.choice(["Just got back from {i} {rel}! {S} was unreal.", "I was in {i} {rel}, {sight} blew my mind.",
                          "{Rel} I flew to {i} for a few days. Still dreaming about {sight}."]) \
            .format(i=pl["i"], rel=rel, Rel=rel.capitalize(), sight=pl["sight"], S=pl["sight"].capitalize())
        out.append({"says": [say], "reply": [rng.choice([f"{pl['i']} is on my list! What was the best part?",
                                                         f"Jealous! I've never been to {pl['country']}."])],
                    "caption": [CAPTIONS["place"].format(sight=pl["sight"]) if rng.random() < 0.3 else None],
                    "qs": [(rng.choice(["Where did {p} travel to?", "Which city did {p} visit?",
                                        "What trip did {p} take?"]).format(p=p), 4, [0])][: len(places) == 1] + [
                           (rng.choice(["When did {p} go to {i}?", "When was {p} in {c}?"]).format(p=p, i=pl["i"],
                                                                                                 c=pl["country"]), 2, [0]),
                           (rng.choice(["What did {p} like about {i}?"]).format(p=p, i=pl["i"]), 4, [0])],
                    "kind": "place"})
    if len(places) > 1:
        out.append({"multi": list(range(first, len(out))),
                    "qs": [(rng.choice(["What countries has {p} visited?", "Where has {p} travelled?"]).format(p=p), 1)]})

    # dated events: temporal questions
    for done, asked in rng.sample(EVENTS, rng.randint(4, 7)):
        rel, _ = rng.choice(WHEN)
        say = rng.choice(["{Rel} I {done}, what a day.", "So, I {done} {rel}!", "Guess what I did {rel}: I {done}.",
                          "I {done} {rel} and I'm still thinking about it."]).format(Rel=rel.capitalize(), rel=rel, done=done)
        out.append({"says": [say], "reply": [rng.choice(["Wait, really? Tell me everything!", "That's huge, well done!",
                                                         "Oh wow, how did that go?", "I had no idea, that's wonderful."])],
                    "caption": [None],
                    "qs": [(f"When did {p} {asked}?", 2, [0])] + ([(f"What did {p} do {rel}?", 4, [0])] if rng.random() < 0.3 else []),
                    "kind": "event"})

    # food, books, goals, causes, family
    dish = rng.choice(DISHES)
    out.append({"says": [rng.choice(["I made {i} for dinner, my grandmother's recipe.", "Tried cooking {i} tonight and it actually worked!"])
                         .format(**dish)],
                "reply": ["Save me some next time!"], "caption": [CAPTIONS["dish"].format(i=dish["i"]) if rng.random() < 0.3 else None],
                "qs": [(rng.choice(["What did {p} cook?", "What dish did {p} make for dinner?"]).format(p=p), 4, [0]),
                       (rng.choice(["What kind of cuisine does {p} like to cook?"]).format(p=p), 3, [0])], "kind": "dish"})
    title = f"The {rng.choice(BOOK_A)} {rng.choice(BOOK_B)}"
    author, genre = rng.choice(AUTHORS), rng.choice(GENRES)
    out.append({"says": [rng.choice(["I'm reading \"{t}\" by {a}, a {g} novel, and I can't put it down.",
                                     "You have to read \"{t}\". {a} writes the best {g}."]).format(t=title, a=author, g=genre)],
                "reply": ["Adding it to my list!"], "caption": [None],
                "qs": [(rng.choice(["What book is {p} reading?", "What novel did {p} recommend?"]).format(p=p), 4, [0]),
                       (f"What genre of books does {p} enjoy?", 3, [0])], "kind": "book"})
    goal, goal_q = rng.choice(GOALS)
    out.append({"says": [rng.choice(["My dream is to {g} one day.", "I'm saving up so I can {g} in a couple of years.",
                                     "I've decided: I'm going to {g}."]).format(g=goal)],
                "reply": ["I can totally see you doing that."], "caption": [None],
                "qs": [(rng.choice(["What is {p} saving up for?", "What are {p}'s plans for the future?",
                                    "What does {p} dream of doing?"]).format(p=p), 4, [0]),
                       (f"Does {p} want to {goal_q}?", 3, [0])], "kind": "goal"})
    cause, field = rng.choice(CAUSES)
    out.append({"says": [rng.choice(["I helped out at {c} again on Sunday, it felt good.",
                                     "I've started volunteering at {c} every other weekend."]).format(c=cause)],
                "reply": ["That's really kind of you."], "caption": [None],
                "qs": [(rng.choice(["Where does {p} volunteer?", "What organisation does {p} help?"]).format(p=p), 4, [0]),
                       (f"What causes does {p} care about?", 3, [0])], "kind": "cause"})
    if rng.random() < 0.6:
        kids = rng.sample(KIDS, rng.choice([1, 2]))
        idx = []
        for k in kids:
            age = rng.randint(3, 14)
            idx.append(len(out))
            out.append({"says": [rng.choice(["{k} turned {a} this week, where does the time go?",
                                             "My {a}-year-old, {k}, just lost a tooth and made a whole speech about it."])
                                 .format(k=k, a=age)],
                        "reply": [rng.choice([f"Give {k} a hug from me!", "Kids are the best."])], "caption": [None],
                        "qs": [(rng.choice(["How old is {p}'s child {k}?", "What happened with {p}'s kid {k}?"]).format(p=p, k=k), 4, [0])],
                        "kind": "family"})
        if len(kids) > 1:
            out.append({"multi": idx, "qs": [(f"What are the names of {p}'s children?", 1)]})
    return out


def session_stamp(when: datetime) -> str:
    h = when.hour % 12 or 12
    return f"{h}:{when.minute:02d} {'am' if when.hour < 12 else 'pm'} on {when.day} {when.strftime('%B')}, {when.year}"


def conversation(rng: random.Random, num: int) -> dict:
    a, b = rng.sample(NAMES, 2)
    n_sessions = rng.randint(14, 22)
    start = datetime(rng.randint(2020, 2024), rng.randint(1, 12), rng.randint(1, 28), rng.randint(8, 21), rng.choice([0, 12, 25, 41, 56]))
    times = [start]
    for _ in range(n_sessions - 1):
        times.append(times[-1] + timedelta(days=rng.randint(4, 30), minutes=rng.randint(-300, 300)))
    # Every told fact (a speaker's "says") goes to a session; a fact of several says spreads over sessions.
    plan: dict[int, list[tuple[str, str, dict, int]]] = {s: [] for s in range(n_sessions)}
    told = []
    for me, other in ((a, b), (b, a)):
        fs = facts(rng, me, other)
        told.append((me, other, fs))
        for f in fs:
            if "says" not in f:
                continue
            sess = sorted(rng.sample(range(n_sessions), len(f["says"])))
            for k, s in enumerate(sess):
                plan[s].append((me, other, f, k))
    conv: dict = {"speaker_a": a, "speaker_b": b}
    where: dict[tuple[int, int], str] = {}  # (id(fact), say index) -> dia_id
    for s in range(n_sessions):
        turns: list[dict] = []
        who = rng.choice([a, b])

        def say(speaker: str, text: str, caption: str | None = None, turns: list = turns, s: int = s) -> str:
            t = {"speaker": speaker, "dia_id": f"D{s + 1}:{len(turns) + 1}", "text": text}
            if caption:
                t["blip_caption"] = caption
            turns.append(t)
            return t["dia_id"]

        other = b if who == a else a
        say(who, rng.choice(SMALL_TALK[:2]).format(o=other))
        say(other, rng.choice(SMALL_TALK[2:10]).format(o=who))
        items = plan[s]
        rng.shuffle(items)
        for me, them, f, k in items:
            if rng.random() < 0.4:  # small talk between topics
                say(them, rng.choice(SMALL_TALK[2:-3]).format(o=me))
            where[(id(f), k)] = say(me, f["says"][k], f["caption"][k])
            say(them, f["reply"][min(k, len(f["reply"]) - 1)])
            if rng.random() < 0.3:
                say(me, rng.choice(["Thanks! It really made my week.", "Yeah, I'm pretty proud of it.",
                                    "I'll tell you more about it next time.", "Honestly it was a bit much, but good."]))
        for _ in range(rng.randint(1, 4)):
            say(rng.choice([a, b]), rng.choice(SMALL_TALK[2:-3]).format(o=rng.choice([a, b])))
        closer = rng.choice([a, b])
        say(closer, rng.choice(SMALL_TALK[-12:-10]).format(o=b if closer == a else a))
        conv[f"session_{s + 1}_date_time"] = session_stamp(times[s])
        conv[f"session_{s + 1}"] = turns
    qa = []
    for _me, _other, fs in told:
        for f in fs:
            if "says" in f:
                for q, cat, idx in f["qs"]:
                    qa.append({"question": q, "evidence": [where[(id(f), k)] for k in idx], "category": cat})
            else:  # a question over several facts' first says
                ev = [where[(id(fs[j]), 0)] for j in f["multi"]]
                for q, cat in f["qs"]:
                    qa.append({"question": q, "evidence": ev, "category": cat})
    return {"sample_id": f"synth-{num:02d}", "conversation": conv, "qa": qa}


def generate(seed: int, convs: int) -> list[dict]:
    rng = random.Random(seed)
    return [conversation(rng, n + 1) for n in range(convs)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--convs", type=int, default=12, help="conversations (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="write the conversations here (LoCoMo's JSON layout)")
    args = ap.parse_args(argv)
    data = generate(args.seed, args.convs)
    if args.out:
        args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    turns = sum(len(v) for c in data for k, v in c["conversation"].items() if k.startswith("session_") and k.count("_") == 1)
    print(json.dumps({"seed": args.seed, "conversations": len(data), "turns": turns,
                      "questions": sum(len(c["qa"]) for c in data),
                      "by_category": dict(sorted(Counter(q["category"] for c in data for q in c["qa"]).items())),
                      "wrote": str(args.out) if args.out else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
