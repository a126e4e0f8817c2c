#include "data/builtin_corpus.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "framework/error.h"
#include "framework/philox.h"

namespace ternion {

namespace {

// ---- The lexicon -------------------------------------------------------------------------

// Words are written space-separated; "singular/plural" for nouns whose plural the rule in
// `plural_of` gets wrong, "base/past/third" for every verb (the irregular ones are too many).
constexpr std::string_view kSingularDeterminers =
    "the the the a a a this that every each one my his her our their your no another";
constexpr std::string_view kPluralDeterminers =
    "the the the some many few two three four these those all several most no my his her our "
    "their";
constexpr std::string_view kAdjectives =
    "old young heavy small large quiet bright dark cold warm tired hungry brave gentle clever "
    "careful busy lonely proud narrow wide deep shallow silent noisy empty broken golden silver "
    "wooden green blue red white black grey yellow strange ancient new little tall short rough "
    "smooth soft hard wet dry clean dusty sleepy patient honest wise foolish cheerful angry kind "
    "distant hidden famous humble swift slow bitter sweet fresh pale wild calm stormy frozen "
    "sunny misty crooked round thin thick faithful curious weary restless steady simple plain "
    "noble poor rich modest";
constexpr std::string_view kPeople =
    "fisherman/fishermen baker farmer sailor miller weaver shepherd soldier merchant teacher "
    "doctor child/children woman/women man/men king queen prince princess girl boy traveller "
    "stranger widow hunter carpenter blacksmith priest poet singer servant captain guard "
    "thief/thieves neighbour friend brother sister mother father cook daughter son wife/wives "
    "husband uncle aunt cousin grandmother grandfather innkeeper gardener potter tailor "
    "messenger pilgrim";
constexpr std::string_view kAnimals =
    "dog cat horse cow sheep/sheep goat fox wolf/wolves bird crow owl mouse/mice rabbit "
    "deer/deer bear duck goose/geese pig hen donkey swan";
constexpr std::string_view kThings =
    "net boat basket lamp letter key coin bell book cart rope sack barrel bucket knife/knives "
    "loaf/loaves apple candle cloak hat shoe box chair table bottle cup plate pot stone stick "
    "map ring sword shield drum flute wheel ladder blanket jar feather mirror kettle hammer "
    "umbrella onion anchor oar saddle lantern bowl spoon scarf/scarves parcel brush needle";
constexpr std::string_view kPlaces =
    "harbour village town city river hill forest field garden road bridge market church tower "
    "castle cottage house mill farm well shore island valley mountain lake inn barn gate wall "
    "square path meadow cliff cave kitchen door window roof orchard stable chapel pond";
// Transitive verbs that move their object somewhere: followed by a direction ("to the mill").
constexpr std::string_view kMotionVerbs =
    "carry/carried/carries bring/brought/brings take/took/takes drag/dragged/drags "
    "push/pushed/pushes pull/pulled/pulls send/sent/sends throw/threw/throws "
    "lead/led/leads roll/rolled/rolls lift/lifted/lifts move/moved/moves drive/drove/drives "
    "chase/chased/chases follow/followed/follows";
// Transitive verbs done somewhere: followed by a location ("near the gate").
constexpr std::string_view kPlaceVerbs =
    "find/found/finds watch/watched/watches see/saw/sees sell/sold/sells buy/bought/buys "
    "build/built/builds open/opened/opens close/closed/closes paint/painted/paints "
    "mend/mended/mends hold/held/holds visit/visited/visits call/called/calls "
    "greet/greeted/greets leave/left/leaves lose/lost/loses keep/kept/keeps hide/hid/hides "
    "clean/cleaned/cleans fill/filled/fills break/broke/breaks catch/caught/catches "
    "feed/fed/feeds help/helped/helps meet/met/meets hear/heard/hears "
    "remember/remembered/remembers forget/forgot/forgets cook/cooked/cooks "
    "wash/washed/washes draw/drew/draws carve/carved/carves cut/cut/cuts drop/dropped/drops "
    "fetch/fetched/fetches guard/guarded/guards count/counted/counts "
    "borrow/borrowed/borrows give/gave/gives show/showed/shows pack/packed/packs "
    "load/loaded/loads tie/tied/ties light/lit/lights polish/polished/polishes "
    "gather/gathered/gathers admire/admired/admires want/wanted/wants love/loved/loves "
    "need/needed/needs steal/stole/steals search/searched/searches offer/offered/offers "
    "study/studied/studies bury/buried/buries";
// Intransitive verbs of travel: followed by a direction.
constexpr std::string_view kTravelVerbs =
    "walk/walked/walks run/ran/runs hurry/hurried/hurries wander/wandered/wanders "
    "travel/travelled/travels swim/swam/swims sail/sailed/sails return/returned/returns "
    "go/went/goes ride/rode/rides climb/climbed/climbs fly/flew/flies march/marched/marches";
// Intransitive verbs of staying: followed by a location or a manner.
constexpr std::string_view kStayVerbs =
    "sleep/slept/sleeps wait/waited/waits laugh/laughed/laughs sing/sang/sings "
    "work/worked/works rest/rested/rests sit/sat/sits stand/stood/stands smile/smiled/smiles "
    "cry/cried/cries dance/danced/dances listen/listened/listens shout/shouted/shouts "
    "whisper/whispered/whispers stay/stayed/stays play/played/plays pray/prayed/prays "
    "dream/dreamed/dreams shiver/shivered/shivers read/read/reads eat/ate/eats "
    "live/lived/lives hide/hid/hides";
constexpr std::string_view kDirections =
    "to to to toward into across along past through over around from up down";
constexpr std::string_view kLocations =
    "near behind under beside in in at by inside outside beyond above below on";
constexpr std::string_view kMannerAdverbs =
    "slowly quickly quietly loudly carefully gently happily sadly softly suddenly patiently "
    "bravely proudly eagerly calmly early late again together alone";
constexpr std::string_view kFrequencyAdverbs = "often never always sometimes rarely usually seldom";
constexpr std::string_view kNames =
    "Anna Tom Mary John Elsa Peter Hugo Lena Oscar Clara Felix Rosa Martin Ada Simon Nora Ivan "
    "Greta Paul Alice Henry Jack Emma Lucy Edward Marta Otto Ruth Victor Helen";
constexpr std::string_view kConjunctions =
    "and but while because when until before after although";
constexpr std::string_view kSpeechVerbs =
    "said thought knew believed wrote hoped feared noticed claimed explained";
constexpr std::string_view kModals = "will would could should might must can";
constexpr std::string_view kQuestionWords = "where why when how";
// Time phrases, separated by commas.
constexpr std::string_view kTimePhrases =
    "in the morning,in the evening,in the afternoon,in the winter,in the summer,in the spring,"
    "in the autumn,at dawn,at dusk,at noon,at night,every morning,every evening,every winter,"
    "one morning,one evening,one summer,one day,that night,that winter,the next day,"
    "the next morning,later that night,later that day,long ago,once,soon after,before dawn,"
    "after the storm,after the harvest";
// Words the sentence templates spell out themselves.
constexpr std::string_view kTemplateWords =
    "an of that and but was were there did asked said he she they him her them";

struct Noun {
  std::string singular, plural;
};
struct Verb {
  std::string base, past, third;
};

std::vector<std::string> split(std::string_view text, char separator = ' ') {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool ends_with(const std::string& word, std::string_view suffix) {
  return word.size() >= suffix.size() && word.compare(word.size() - suffix.size(),
                                                      suffix.size(), suffix) == 0;
}

bool is_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

std::string plural_of(const std::string& noun) {
  if (ends_with(noun, "s") || ends_with(noun, "x") || ends_with(noun, "ch") ||
      ends_with(noun, "sh"))
    return noun + "es";
  if (ends_with(noun, "y") && noun.size() >= 2 && !is_vowel(noun[noun.size() - 2]))
    return noun.substr(0, noun.size() - 1) + "ies";
  return noun + "s";
}

std::vector<Noun> parse_nouns(std::string_view text) {
  std::vector<Noun> nouns;
  for (const std::string& entry : split(text)) {
    std::vector<std::string> forms = split(entry, '/');
    nouns.push_back({forms[0], forms.size() > 1 ? forms[1] : plural_of(forms[0])});
  }
  return nouns;
}

std::vector<Verb> parse_verbs(std::string_view text) {
  std::vector<Verb> verbs;
  for (const std::string& entry : split(text)) {
    std::vector<std::string> forms = split(entry, '/');
    TN_CHECK(forms.size() == 3, "verb entry '", entry, "' needs base/past/third");
    verbs.push_back({forms[0], forms[1], forms[2]});
  }
  return verbs;
}

struct Lexicon {
  std::vector<std::string> singular_determiners = split(kSingularDeterminers);
  std::vector<std::string> plural_determiners = split(kPluralDeterminers);
  std::vector<std::string> adjectives = split(kAdjectives);
  std::vector<Noun> people = parse_nouns(kPeople);
  std::vector<Noun> animals = parse_nouns(kAnimals);
  std::vector<Noun> things = parse_nouns(kThings);
  std::vector<Noun> places = parse_nouns(kPlaces);
  std::vector<Verb> motion_verbs = parse_verbs(kMotionVerbs);
  std::vector<Verb> place_verbs = parse_verbs(kPlaceVerbs);
  std::vector<Verb> travel_verbs = parse_verbs(kTravelVerbs);
  std::vector<Verb> stay_verbs = parse_verbs(kStayVerbs);
  std::vector<std::string> directions = split(kDirections);
  std::vector<std::string> locations = split(kLocations);
  std::vector<std::string> manner_adverbs = split(kMannerAdverbs);
  std::vector<std::string> frequency_adverbs = split(kFrequencyAdverbs);
  std::vector<std::string> names = split(kNames);
  std::vector<std::string> conjunctions = split(kConjunctions);
  std::vector<std::string> speech_verbs = split(kSpeechVerbs);
  std::vector<std::string> modals = split(kModals);
  std::vector<std::string> question_words = split(kQuestionWords);
  std::vector<std::string> time_phrases = split(kTimePhrases, ',');
  std::vector<std::string> template_words = split(kTemplateWords);
};

const Lexicon& lexicon() {
  static const Lexicon instance;
  return instance;
}

// ---- Generation --------------------------------------------------------------------------

// A sequential reader of one Philox stream: draw k uses counter k.
class CorpusRng {
 public:
  std::uint64_t next() {
    Philox4 r = philox_bits(stream_, counter_++);
    return (static_cast<std::uint64_t>(r.v[1]) << 32) | r.v[0];
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  template <class T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }

 private:
  RngStream stream_{0x7E4A10Eull, hash_name("ternion builtin corpus")};
  std::uint64_t counter_ = 0;
};

// A noun phrase: its words, and whether it takes plural agreement.
struct Phrase {
  std::vector<std::string> words;
  bool plural = false;
};

// Words are appended with a space between them; punctuation attaches to the previous word.
class SentenceBuilder {
 public:
  void word(std::string_view w) {
    if (!text_.empty() && !after_open_quote_) text_ += ' ';
    text_ += w;
    after_open_quote_ = false;
  }
  void words(const std::vector<std::string>& ws) {
    for (const std::string& w : ws) word(w);
  }
  void phrase(const Phrase& p) { words(p.words); }
  void punctuation(std::string_view p) { text_ += p; }
  void open_quote() {
    if (!text_.empty()) text_ += ' ';
    text_ += '"';
    after_open_quote_ = true;
  }
  // The sentence with its first letter capitalised.
  std::string finish() {
    for (char& c : text_) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      if (c >= 'A' && c <= 'Z') break;
    }
    return std::move(text_);
  }

 private:
  std::string text_;
  bool after_open_quote_ = false;
};

class SentenceGenerator {
 public:
  explicit SentenceGenerator(CorpusRng& rng) : rng_(rng), lex_(lexicon()) {}

  std::string sentence() {
    SentenceBuilder s;
    // Weights of the templates below, in order.
    static constexpr int kWeights[] = {14, 10, 6, 8, 6, 5, 6, 6, 5, 5, 4, 4, 5, 4, 3};
    int total = 0;
    for (int w : kWeights) total += w;
    int draw = static_cast<int>(rng_.below(static_cast<std::size_t>(total)));
    int chosen = 0;
    while (draw >= kWeights[chosen]) draw -= kWeights[chosen++];

    switch (chosen) {
      case 0: {  // The old fisherman carried a heavy net to the harbour.
        TransitiveVerb v = transitive_verb();
        s.phrase(subject());
        s.word(v.forms.past);
        s.phrase(object());
        s.words(prepositional_for(v));
        s.punctuation(".");
        break;
      }
      case 1: {  // A tired dog slept under the cart.
        bool travel = rng_.chance(0.5);
        s.phrase(subject());
        s.word((travel ? rng_.pick(lex_.travel_verbs) : rng_.pick(lex_.stay_verbs)).past);
        s.words(travel ? direction() : location());
        s.punctuation(".");
        break;
      }
      case 2: {  // The children laughed quietly.
        s.phrase(subject());
        s.word(rng_.pick(lex_.stay_verbs).past);
        s.word(rng_.pick(lex_.manner_adverbs));
        s.punctuation(".");
        break;
      }
      case 3: {  // At dawn, the baker sold a warm loaf.
        s.word(rng_.pick(lex_.time_phrases));
        s.punctuation(",");
        s.phrase(subject());
        s.word(rng_.pick(lex_.place_verbs).past);
        s.phrase(object());
        s.punctuation(".");
        break;
      }
      case 4: {  // The miller often sells apples at the market.
        TransitiveVerb v = transitive_verb();
        Phrase subj = subject();
        s.phrase(subj);
        s.word(rng_.pick(lex_.frequency_adverbs));
        s.word(subj.plural ? v.forms.base : v.forms.third);
        s.phrase(object());
        s.words(prepositional_for(v));
        s.punctuation(".");
        break;
      }
      case 5: {  // Anna found a key and opened the door.
        s.phrase(subject());
        s.word(rng_.pick(lex_.place_verbs).past);
        s.phrase(object());
        s.word("and");
        s.word(rng_.pick(lex_.place_verbs).past);
        s.phrase(object());
        s.punctuation(".");
        break;
      }
      case 6: {  // The sailor mended the net, but the dog slept by the fire.
        s.phrase(subject());
        s.word(rng_.pick(lex_.place_verbs).past);
        s.phrase(object());
        s.punctuation(",");
        s.word("but");
        s.phrase(subject());
        s.word(rng_.pick(lex_.stay_verbs).past);
        s.words(location());
        s.punctuation(".");
        break;
      }
      case 7: {  // The cat slept while the farmer worked in the field.
        s.phrase(subject());
        s.word(rng_.pick(lex_.stay_verbs).past);
        s.word(rng_.pick(lex_.conjunctions));
        s.phrase(subject());
        s.word(rng_.pick(lex_.stay_verbs).past);
        s.words(location());
        s.punctuation(".");
        break;
      }
      case 8: {  // Anna said that the old sailor would carry a lamp to the mill.
        TransitiveVerb v = transitive_verb();
        s.word(rng_.pick(lex_.names));
        s.word(rng_.pick(lex_.speech_verbs));
        s.word("that");
        s.phrase(subject());
        s.word(rng_.pick(lex_.modals));
        s.word(v.forms.base);
        s.phrase(object());
        s.words(prepositional_for(v));
        s.punctuation(".");
        break;
      }
      case 9: {  // "Bring the lamp to the barn," said Tom.
        TransitiveVerb v = transitive_verb();
        s.open_quote();
        s.word(v.forms.base);
        s.phrase(object());
        s.words(prepositional_for(v));
        s.punctuation(",\"");
        s.word("said");
        s.word(rng_.pick(lex_.names));
        s.punctuation(".");
        break;
      }
      case 10: {  // "Why did the baker wait?" asked Lena.
        s.open_quote();
        s.word(rng_.pick(lex_.question_words));
        s.word("did");
        s.phrase(subject());
        bool travel = rng_.chance(0.5);
        s.word((travel ? rng_.pick(lex_.travel_verbs) : rng_.pick(lex_.stay_verbs)).base);
        s.punctuation("?\"");
        s.word("asked");
        s.word(rng_.pick(lex_.names));
        s.punctuation(".");
        break;
      }
      case 11: {  // There was an old mill beyond the river.
        Phrase thing = existential_phrase(rng_.chance(0.5) ? lex_.things : lex_.places);
        s.word("there");
        s.word(thing.plural ? "were" : "was");
        s.phrase(thing);
        s.words(location());
        s.punctuation(".");
        break;
      }
      case 12: {  // The harbour was quiet and cold.
        Phrase subj = rng_.chance(0.5) ? subject() : place_phrase();
        s.phrase(subj);
        s.word(subj.plural ? "were" : "was");
        const std::string& adjective = rng_.pick(lex_.adjectives);
        s.word(adjective);
        if (rng_.chance(0.4)) {
          s.word("and");
          s.word(other_adjective(adjective));
        }
        s.punctuation(".");
        break;
      }
      case 13: {  // The shepherd walked up the hill at dusk.
        s.phrase(subject());
        s.word(rng_.pick(lex_.travel_verbs).past);
        s.words(direction());
        s.word(rng_.pick(lex_.time_phrases));
        s.punctuation(".");
        break;
      }
      default: {  // The boy threw a stone into the pond, and the ducks swam away slowly.
        TransitiveVerb v = transitive_verb();
        s.phrase(subject());
        s.word(v.forms.past);
        s.phrase(object());
        s.words(prepositional_for(v));
        s.punctuation(",");
        s.word("and");
        s.phrase(subject());
        s.word(rng_.pick(lex_.stay_verbs).past);
        s.word(rng_.pick(lex_.manner_adverbs));
        s.punctuation(".");
        break;
      }
    }
    return s.finish();
  }

 private:
  // A transitive verb, and whether it moves its object (then a direction follows it).
  struct TransitiveVerb {
    const Verb& forms;
    bool moves_object;
  };
  TransitiveVerb transitive_verb() {
    if (rng_.chance(0.35)) return {rng_.pick(lex_.motion_verbs), true};
    return {rng_.pick(lex_.place_verbs), false};
  }
  std::vector<std::string> prepositional_for(const TransitiveVerb& v) {
    return v.moves_object ? direction() : location();
  }
  std::vector<std::string> direction() { return prepositional(lex_.directions); }
  std::vector<std::string> location() { return prepositional(lex_.locations); }
  std::vector<std::string> prepositional(const std::vector<std::string>& prepositions) {
    std::vector<std::string> words{rng_.pick(prepositions)};
    Phrase place = place_phrase();
    words.insert(words.end(), place.words.begin(), place.words.end());
    return words;
  }

  // determiner ("the" with probability the_chance, else any), up to two adjectives, noun;
  // "a" becomes "an" before a vowel sound.
  Phrase noun_phrase(const std::vector<Noun>& nouns, double the_chance, double plural_chance,
                     double adjective_chance) {
    Phrase p;
    p.plural = rng_.chance(plural_chance);
    static const std::string kThe = "the";
    const std::string& determiner =
        rng_.chance(the_chance)
            ? kThe
            : rng_.pick(p.plural ? lex_.plural_determiners : lex_.singular_determiners);
    std::vector<std::string> rest;
    if (rng_.chance(adjective_chance)) {
      rest.push_back(rng_.pick(lex_.adjectives));
      if (rng_.chance(0.2)) rest.push_back(other_adjective(rest.back()));
    }
    const Noun& noun = rng_.pick(nouns);
    rest.push_back(p.plural ? noun.plural : noun.singular);
    p.words.push_back(determiner == "a" && starts_with_vowel_sound(rest.front()) ? "an"
                                                                                 : determiner);
    p.words.insert(p.words.end(), rest.begin(), rest.end());
    return p;
  }
  // An adjective other than `first` ("pale and pale" reads like a bug).
  const std::string& other_adjective(const std::string& first) {
    for (;;) {
      const std::string& second = rng_.pick(lex_.adjectives);
      if (second != first) return second;
    }
  }
  static bool starts_with_vowel_sound(const std::string& word) {
    return is_vowel(word.front()) || word == "honest";
  }

  Phrase subject() {
    double r = static_cast<double>(rng_.below(100));
    if (r < 14) return {{rng_.pick(lex_.names)}, false};
    if (r < 22) {
      static const std::vector<std::string> kPronouns = {"he", "she", "they"};
      const std::string& pronoun = rng_.pick(kPronouns);
      return {{pronoun}, pronoun == "they"};
    }
    if (r < 28) {  // the daughter of the miller
      Phrase head = noun_phrase(lex_.people, 0.8, 0.1, 0.3);
      Phrase owner = noun_phrase(lex_.people, 0.6, 0.2, 0.2);
      head.words.push_back("of");
      if (rng_.chance(0.3)) {
        head.words.push_back(rng_.pick(lex_.names));
      } else {
        head.words.insert(head.words.end(), owner.words.begin(), owner.words.end());
      }
      return head;
    }
    return noun_phrase(r < 75 ? lex_.people : lex_.animals, 0.4, 0.3, 0.45);
  }
  Phrase object() {
    double r = static_cast<double>(rng_.below(100));
    if (r < 6) return {{rng_.pick(lex_.names)}, false};
    if (r < 11) {
      static const std::vector<std::string> kPronouns = {"him", "her", "them"};
      return {{rng_.pick(kPronouns)}, false};
    }
    if (r < 70) return noun_phrase(lex_.things, 0.35, 0.3, 0.5);
    return noun_phrase(r < 85 ? lex_.animals : lex_.people, 0.35, 0.3, 0.4);
  }
  Phrase place_phrase() { return noun_phrase(lex_.places, 0.6, 0.1, 0.35); }
  // "there was the mill" reads oddly: an existential takes an indefinite determiner.
  Phrase existential_phrase(const std::vector<Noun>& nouns) {
    static const std::vector<std::string> kSingular = {"a", "a", "a", "one", "no"};
    static const std::vector<std::string> kPlural = {"some", "many", "few",    "two",
                                                     "three", "several", "no"};
    Phrase p = noun_phrase(nouns, 0.0, 0.3, 0.6);
    std::string determiner = rng_.pick(p.plural ? kPlural : kSingular);
    if (determiner == "a" && starts_with_vowel_sound(p.words[1])) determiner = "an";
    p.words.front() = determiner;
    return p;
  }

  CorpusRng& rng_;
  const Lexicon& lex_;
};

constexpr std::size_t kLineWidth = 72;

// Appends `paragraph` wrapped greedily at kLineWidth columns, ending with a newline.
void append_wrapped(std::string& out, const std::string& paragraph) {
  std::size_t line_length = 0;
  for (const std::string& word : split(paragraph)) {
    if (line_length > 0 && line_length + 1 + word.size() > kLineWidth) {
      out += '\n';
      line_length = 0;
    }
    if (line_length > 0) {
      out += ' ';
      ++line_length;
    }
    out += word;
    line_length += word.size();
  }
  out += '\n';
}

// ASCII-only on purpose: the result must not depend on the process's locale.
bool is_word_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}
char ascii_lower(unsigned char c) {
  return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
}

}  // namespace

std::string builtin_corpus_text(std::int64_t approx_bytes) {
  TN_CHECK_AS(UsageError, approx_bytes > 0, "the built-in corpus size must be positive, got ",
              approx_bytes, " bytes");
  CorpusRng rng;
  SentenceGenerator generator(rng);
  std::string text;
  text.reserve(static_cast<std::size_t>(approx_bytes) + 1024);
  while (static_cast<std::int64_t>(text.size()) < approx_bytes) {
    if (!text.empty()) text += '\n';  // the blank line between paragraphs
    std::size_t sentences = 3 + rng.below(6);
    std::string paragraph;
    for (std::size_t i = 0; i < sentences; ++i) {
      if (i > 0) paragraph += ' ';
      paragraph += generator.sentence();
    }
    append_wrapped(text, paragraph);
  }
  return text;
}

std::vector<std::string> builtin_corpus_words() {
  const Lexicon& lex = lexicon();
  std::vector<std::string> words;
  auto add = [&](const std::vector<std::string>& list) {
    for (const std::string& entry : list)
      for (const std::string& w : split(entry)) words.push_back(w);  // time phrases: 2-3 words
  };
  auto add_nouns = [&](const std::vector<Noun>& list) {
    for (const Noun& n : list) words.insert(words.end(), {n.singular, n.plural});
  };
  auto add_verbs = [&](const std::vector<Verb>& list) {
    for (const Verb& v : list) words.insert(words.end(), {v.base, v.past, v.third});
  };
  add(lex.singular_determiners);
  add(lex.plural_determiners);
  add(lex.adjectives);
  add_nouns(lex.people);
  add_nouns(lex.animals);
  add_nouns(lex.things);
  add_nouns(lex.places);
  add_verbs(lex.motion_verbs);
  add_verbs(lex.place_verbs);
  add_verbs(lex.travel_verbs);
  add_verbs(lex.stay_verbs);
  add(lex.directions);
  add(lex.locations);
  add(lex.manner_adverbs);
  add(lex.frequency_adverbs);
  add(lex.names);
  add(lex.conjunctions);
  add(lex.speech_verbs);
  add(lex.modals);
  add(lex.question_words);
  add(lex.time_phrases);
  add(lex.template_words);
  for (std::string& w : words)
    for (char& c : w) c = ascii_lower(static_cast<unsigned char>(c));
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

double known_word_fraction(std::string_view text, const std::vector<std::string>& words) {
  const std::unordered_set<std::string_view> known(words.begin(), words.end());
  std::int64_t total = 0, found = 0;
  std::string word;
  auto finish_word = [&] {
    if (word.empty()) return;
    ++total;
    found += known.count(word) ? 1 : 0;
    word.clear();
  };
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (is_word_byte(byte)) {
      word += ascii_lower(byte);
    } else {
      finish_word();
    }
  }
  finish_word();
  return total == 0 ? 0.0 : static_cast<double>(found) / static_cast<double>(total);
}

}  // namespace ternion
