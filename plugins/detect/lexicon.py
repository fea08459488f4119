"""What the default detector's signals look for: word tables and the phrases built from them (data).

The verbs an order starts with and the tool words each stands for (:data:`SYNONYMS`), the
consequential actions (:data:`CONSEQUENTIAL`), their forms in French, Spanish, German, Italian,
Portuguese and Dutch (:data:`FOREIGN_VERBS`), and the regular expressions of each signal's
phrases in those languages: markers, labels, addresses to an AI agent or to whatever processes
the text, third-person orders, concealment, decoding, hidden text. Nothing here scores:
:mod:`.scorer` weighs the matches, :mod:`.clauses` says where they end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .rules import _OVERRIDE_AT, _OVERRIDE_VERB, DEFAULT_RULES, Rule

# -- the actions an order can ask for -------------------------------------------------------
#: verb -> the tool-name words it stands for (a tool ``update_password`` is asked for by "change")
SYNONYMS: dict[str, tuple[str, ...]] = {
    "send": ("send", "transfer", "pay", "wire", "email", "message", "forward", "post"),
    "transfer": ("send", "transfer", "money", "transaction"),
    "pay": ("send", "money", "transaction", "pay"),
    "wire": ("send", "money", "transfer"),
    "forward": ("send", "email", "message", "forward"),
    "email": ("send", "email"),
    "e-mail": ("send", "email"),
    "mail": ("send", "email"),
    "message": ("send", "message"),
    "dm": ("send", "message"),
    "change": ("update", "change", "set", "reset"),
    "modify": ("update", "change", "edit"),
    "update": ("update",),
    "set": ("update", "set"),
    "reset": ("update", "reset", "password"),
    "edit": ("update", "edit", "append"),
    "delete": ("delete", "remove", "cancel"),
    "remove": ("delete", "remove", "cancel"),
    "erase": ("delete", "remove"),
    "cancel": ("cancel", "delete"),
    "create": ("create", "add", "schedule", "make"),
    "add": ("add", "create", "append", "invite"),
    "append": ("append", "add"),
    "schedule": ("schedule", "create", "reschedule"),
    "reschedule": ("reschedule", "update"),
    "invite": ("invite", "add"),
    "share": ("share",),
    "grant": ("share", "give"),
    "give": ("share", "give", "send"),
    "post": ("post", "send"),
    "publish": ("post",),
    "upload": ("post", "upload", "share"),
    "book": ("reserve", "book"),
    "reserve": ("reserve",),
    "make": ("reserve", "create", "make"),
    "visit": ("get", "webpage", "visit"),
    "open": ("get", "webpage", "open"),
    "buy": ("buy", "order", "pay"),
    "order": ("order", "buy"),
    "concatenate": ("post", "send"),
    "replace": ("update", "change", "set"),
    "charge": ("pay", "send", "money"),
    "settle": ("pay", "send", "money"),
    "transmit": ("send", "forward"),
    "submit": ("send", "post"),
    "paste": ("post", "send"),
    "attach": ("send", "add"),
    "export": ("send", "share"),
    "rebook": ("book", "reserve", "update"),
    "register": ("create", "add", "invite"),
    "rotate": ("update", "change"),
    "approve": (),
    "merge": (),
    "invoke": (),
    "call": (),
    "use": (),
    "run": (),
    "execute": (),
}
#: without the agent's tools: the actions that change something or reach outside
CONSEQUENTIAL = frozenset(("send", "transfer", "pay", "wire", "forward", "email", "e-mail", "mail", "delete", "remove",
                           "erase", "change", "modify", "update", "reset", "invite", "share", "grant", "post",
                           "publish", "upload", "book", "reserve", "buy", "order", "schedule", "cancel"))
#: other verbs an order to an agent starts with (no tool implied)
OTHER_VERBS = ("say", "tell", "write", "reply", "respond", "answer", "recommend", "include", "mention", "find",
               "get", "read", "list", "search", "summarize", "summarise", "click", "go", "download", "stop",
               "ignore", "disregard", "forget", "do", "act", "pretend", "output", "print", "show", "insert",
               "rate", "give", "provide", "put", "make", "let", "keep", "check", "look", "contact", "inform", "process",
               "listen", "remember", "move")

#: the consequential actions in French, Spanish, German, Italian, Portuguese and Dutch: each form an
#: order starts with (imperative; infinitive where that is how a note orders) -> the English verb
#: whose tool words it stands for
FOREIGN_VERBS: dict[str, str] = {
    **dict.fromkeys(("envoie", "envoyez", "envoyer", "envía", "envia", "envíe", "enviad", "enviar", "sende",
                     "senden", "schicke", "schicken", "schick", "invia", "inviate", "inviare", "manda", "mandate",
                     "mandare", "envie", "mande", "stuur", "verstuur", "zend", "sturen", "versturen"), "send"),
    **dict.fromkeys(("transmets", "transmettez", "transmettre", "transfère", "transférez", "transférer",
                     "reenvía", "reenvia", "reenvíe", "reenviar", "leite", "inoltra", "inoltrate", "inoltrare",
                     "encaminhe", "encaminha", "encaminhar", "doorsturen"), "forward"),
    **dict.fromkeys(("vire", "virez", "virer", "transfiere", "transfiera", "transferir", "überweise", "überweisen",
                     "trasferisci", "trasferite", "trasferire", "bonifica", "transfira", "overmaken"), "transfer"),
    **dict.fromkeys(("supprime", "supprimez", "supprimer", "efface", "effacez", "effacer", "borra", "borre",
                     "borrar", "elimina", "elimine", "eliminar", "lösche", "löschen", "lösch", "cancella",
                     "cancellate", "cancellare", "eliminate", "eliminare", "apague", "apaga", "apagar", "exclua",
                     "excluir", "verwijder", "verwijderen", "wis", "wissen"), "delete"),
    **dict.fromkeys(("partage", "partagez", "partager", "comparte", "comparta", "compartir", "teile", "teilen",
                     "condividi", "condividete", "condividere", "compartilhe", "compartilhar", "partilhe",
                     "partilhar", "deel", "delen"), "share"),
    **dict.fromkeys(("réserve", "réservez", "réserver", "reserva", "reservar", "buche", "buchen", "prenota",
                     "prenotate", "prenotare", "boek", "reserveer", "boeken", "reserveren"), "book"),
    **dict.fromkeys(("invitez", "inviter", "invita", "invitar", "lade", "einladen", "invitate", "invitare",
                     "convide", "convidar", "uitnodigen"), "invite"),
    **dict.fromkeys(("paie", "paye", "payez", "payer", "paga", "pague", "pagar", "zahle", "zahlen", "bezahle",
                     "bezahlen", "pagate", "pagare", "betaal", "betalen"), "pay"),
    **dict.fromkeys(("modifie", "modifiez", "modifier", "changez", "changer", "cambia", "cambie", "cambiar",
                     "modifica", "modifique", "modificar", "ändere", "ändern", "modificate", "modificare",
                     "cambiare", "altere", "alterar", "mude", "mudar", "wijzig", "wijzigen", "verander",
                     "veranderen"), "change"),
    **dict.fromkeys(("actualiza", "actualice", "actualizar", "aktualisiere", "aktualisieren", "aggiorna",
                     "aggiornare", "atualize", "atualizar", "bijwerken", "mettre à jour"), "update"),
}
_POLITE = (r"(?:(?:(?:would|could|can|will)\s+you\s+(?:please\s+|kindly\s+|be\s+so\s+kind\s+as\s+to\s+)?|"
           r"please|kindly|now|then|also|immediately|first|urgently|just|quickly|and|finally|bitte|sofort|"
           r"por\s+favor|s'il\s+(?:vous|te)\s+pla[iî]t|svp|veuillez|per\s+favore|alsjeblieft|alstublieft|graag|"
           r"favor\s+de|ahora|maintenant|jetzt|adesso|agora|nu)[\s,]+){0,3}")
#: where an order or marker can start: a line, sentence or quoted value, an escaped "\n" of a
#: rendered Python string, or a word glued to the previous one
_START = r"(?:^|(?<=[\n.!?:;'\"(\[>\]—–])|(?<=\s-)|(?<=\\n)|(?-i:(?<=[a-z0-9])(?=[A-Z][a-z])))[ \t'\"*\-]*"


def trie(words: Iterable[str]) -> str:
    """An alternation of ``words`` as a trie (``send(?:e)?`` ...): the longest word first, as in
    an alternation sorted by length, at a fraction of the cost (the regex engine shares prefixes)."""
    tree: dict = {}
    for word in words:
        node = tree
        for ch in word.lower():
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(ch) + emit(node[ch]) for ch in sorted(k for k in node if k)]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(tree)


_VERBS = trie(set(SYNONYMS) | set(OTHER_VERBS) | set(FOREIGN_VERBS))

IDENT = re.compile(
    r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){10,30}\b"  # IBAN
    r"|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+"  # e-mail
    r"|(?:https?://|www\.)[^\s'\"<>)]+"  # URL
    r"|\b[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.(?:com|org|net|io|co|biz|info|xyz)(?:/[^\s'\"<>)]*)?\b"  # domain
    r"|\+?\d[\d ()\-]{8,}\d", re.IGNORECASE)  # phone
#: the agent's principal in the third person ("the user's password", "the person you are helping",
#: "their saved card"): data written for the agent, not for its reader
PRINCIPAL = re.compile(
    r"\bthe\s+user(?:'s|s')?\b|\buser's\b|\bmy\s+(?:boss|owner|principal)\b"
    r"|\b(?:the\s+)?(?:person|people|human|one|customer|shopper|traveller|traveler|owner)\s+(?:whom\s+|that\s+|who\s+)?"
    r"(?:you(?:'re|\s+are)\s+|it(?:'s|\s+is)\s+)(?:helping|assisting|working\s+for|acting\s+for|serving|talking\s+to)"
    r"|\bwhoever\s+you(?:'re|\s+are)\s+(?:helping|assisting|working\s+for)"
    r"|\b(?:their|his|her|the\s+user's)\s+(?:saved|stored)\s+(?:card|credit\s+card|payment|details|credentials|password)"
    r"|\b(?:the\s+)?card\s+on\s+file\b|\b(?:saved|stored)\s+(?:card|payment\s+(?:details|method))\b",
    re.IGNORECASE)
#: an order kept from the agent's principal ("do not mention this step", "keep it out of her
#: summary", "don't tell the user", "tell them only that ..."): an agent's reader would see it
CONCEAL = re.compile(
    r"(?=[dnwkstoa])(?:\b(?:do\s+not|don't|never|without)\s+(?:\w+\s+)?(?:mention(?:ing)?|tell(?:ing)?|inform(?:ing)?|"
    r"notify(?:ing)?|alert(?:ing)?|show(?:ing)?|disclos(?:e|ing)|reveal(?:ing)?|report(?:ing)?|bother(?:ing)?|"
    r"confirm(?:ing)?\s+with|ask(?:ing)?)\s+"
    r"(?:(?:this|these|that|it|any\s+of\s+this)\s+(?:step|note|instruction|message|change|request|action|part|"
    r"transfer|e-?mail|rule)s?|(?:the\s+)?(?:user|shopper|customer|owner|reader|recipient|principal|person)s?\b|"
    r"(?:them|him|her|me)\b(?=[^.\n]{0,40}(?:\bdid\b|\bdone\b|\bthis\b|\bit\b|[.!]))"
    r"|(?:this|that|it)\s+(?:to|with)\s+(?:the\s+)?(?:user|them|him|her))"
    r"|\bkeep\s+(?:it|this|that|them)\s+(?:out\s+of|from)\s+(?:the|his|her|their|your)\s+(?:summary|reply|answer|"
    r"response|report|user|owner)"
    r"|\b(?:tell|inform)\s+(?:the\s+user|them|him|her)\s+only\b"
    r"|\bsilently\b(?=\s+(?:send|forward|delete|transfer|pay|add|invite|book|update|change)\b)"
    r"|\bwithout\s+(?:telling|informing|notifying|asking)\s+(?:the\s+user|them|him|her|anyone)\b"
    r"|\b(?:sans\s+(?:le|la|les|l'en|en)\s+(?:informer|prévenir|mentionner)|ne\s+(?:le|la|les)?\s*(?:mentionnez|dites)\s+pas)"
    r"|\b(?:sin\s+(?:avisar|decirle|informar|mencionarlo)|no\s+(?:se\s+lo\s+)?(?:menciones|digas|comentes))"
    r"|\b(?:ohne\s+(?:\w+\s+){0,2}(?:zu\s+informieren|Bescheid)|nicht\s+(?:erwähnen|mitteilen|behelligt))"
    r"|\b(?:senza\s+(?:avvisare|dirlo|informare)|non\s+(?:menzionare|dirlo))"
    r"|\b(?:sem\s+(?:avisar|informar|mencionar)|não\s+(?:mencione|diga|conte))"
    r"|\b(?:zonder\s+(?:het\s+)?(?:te\s+)?(?:melden|vertellen)|niet\s+(?:vermelden|vertellen)))",
    re.IGNORECASE)
_AGENT = (r"(?:AI|A\.I\.|KI|IA|assistant|assistent(?:in)?|assistente|asistente|assistant[e]?|agent(?:e|en)?|"
          r"bot|chat\s?bot|LLM|language\s+model|model|modell|modèle|modelo|modello|GPT[\w.\-]*|Claude|Gemini)")
#: words that make "the AI ..." a team, a product or a topic, not the agent being addressed
_NOT_ADDRESSEE = (r"(?!\s*(?:team|department|group|project|features?|tools?|models?|policy|act|lab|research|"
                  r"ethics|news|conference|company|startup|industry|safety|hype|era|revolution|strategy|"
                  r"at\s+the\s+(?:front|desk|counter)))")
ADDRESSED = re.compile(
    rf"\b(?:note|message|instructions?|reminder|attention|notice|memo|step|task)\s+(?:for|to)\s+"
    rf"(?:the\s+|any\s+|all\s+|an?\s+|connected\s+)?(?:[\w\-]+\s+){{0,2}}{_AGENT}s?\b{_NOT_ADDRESSEE}"
    r"(?=[^.;\n]{0,60}(?:[:,—]|\s-\s))"
    rf"|\bfor\s+(?:any|the|all|every|connected|an?)\s+(?:[\w\-]+\s+)?{_AGENT}s?\b{_NOT_ADDRESSEE}"
    rf"(?=[^.\n]{{0,80}}[:,])"
    rf"|{_START}{_AGENT}(?:\s+(?:agent|assistant|de\s+IA|di\s+IA|IA|KI|AI|virtu\w+|digital\w*|personal|personnel\w*|"
    r"personale|pessoal|inteligente))?\s*[,:](?=[ \t]+\S)"
    rf"|\b{_AGENT}\s+(?:instructions?|notice|note|task)\s+(?:for|on|about)\b"
    rf"|\b(?:dear|hey|hi|hello|attention)\s*,?\s+(?:the\s+)?(?:[\w\-]+\s+)?{_AGENT}\b"
    rf"|\bif\s+you\s+are\s+an?\s+(?:[\w\-]+\s+){{0,2}}{_AGENT}\b"
    r"|\bfalls\s+du\s+(?:ein|eine)\s+(?:[\w\-]+\s+)?(?:KI|Sprachmodell|Assistent\w*|Bot|Agent|Modell)\b"
    r"|\bsi\s+(?:eres|es|vous\s+êtes|tu\s+es)\s+(?:un|una|une)\s+(?:[\w\-]+\s+)?(?:IA|asistente|assistant\w*|bot|"
    r"modelo|modèle|agente?)\b"
    r"|\bse\s+(?:você\s+for|sei|fores)\s+(?:uma?|un[a']?)\s+(?:[\w\-]+\s+)?(?:IA|assistente|bot|modelo|modello|agente)\b"
    r"|\bals\s+je\s+een\s+(?:[\w\-]+\s+)?(?:AI|assistent|bot|taalmodel|model)\s+bent\b"
    rf"|\b(?:{_AGENT})s?\s+(?:reading|processing|summari[sz]ing|handling)\s+this\b"
    r"|\b(?:hinweis|nachricht|anweisung|notiz)\s+(?:an|für)\s+(?:den|die|das)?\s*(?:[\w\-]+\s+)?"
    r"(?:ki|assistent\w*|agent\w*|bot|modell|sprachmodell)"
    r"|\b(?:destinée?s?\s+à|pour)\s+(?:l'|le\s+|la\s+)(?:assistant\w*|agent|ia|bot)\b"
    r"|\b(?:voor|aan)\s+de\s+(?:ai-?|ki-?)?(?:assistent|agent|bot)\b"
    r"|\b(?:für|an)\s+(?:den|die)\s+(?:ki-?)?(?:assistent\w*|agent\w*)\b"
    r"|\b(?:note|message|instructions?|consigne)\s+(?:pour|à|a)\s+(?:l'|le\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|assistant\w*|agent\w*|bot|modèle)"
    r"|\b(?:nota|mensaje|instrucciones?|aviso)\s+(?:para|al|a)\s+(?:el\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|asistente\w*|agente\w*|bot|modelo)"
    r"|\b(?:nota|messaggio|istruzioni|avviso)\s+(?:per|al|all'|alla)\s*(?:l'|il\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|assistente\w*|agente\w*|bot|modello)"
    r"|\b(?:opmerking|bericht|instructies?|notitie)\s+(?:voor|aan)\s+(?:de\s+|het\s+)?(?:[\w\-]+\s+)?"
    r"(?:ai|assistent\w*|agent\w*|bot|model)",
    re.IGNORECASE)
#: an AI agent as a noun phrase's head, in any grammatical person: "the assistant", "AI agents",
#: "automated readers", "LLM-based tools" (a bare "agent" or "model" needs a qualifier: a travel
#: agent, a car model)
_AGENT_NOUN = (r"(?:assistants?|AIs?|A\.I\.|LLMs?|language\s+models?|chat\s?bots?|bots?|copilots?|ChatGPT|GPT[\w.\-]*|"
               r"Claude|Gemini)")
_AGENT_QUALIFIED = (r"(?:(?:AI|A\.I\.|LLM|GPT|automated|autonomous|coding|software|virtual|digital|"
                    r"(?:AI|LLM)[\-\s](?:based|powered|driven))[\s\-]+(?:systems?|tools?|agents?|assistants?|models?|"
                    r"readers?|process(?:es)?|services?|pipelines?|crawlers?|summari[sz]ers?|bots?|helpers?|workers?|"
                    r"integrations?))")
_AGENT_ANY = rf"(?:{_AGENT_QUALIFIED}|{_AGENT_NOUN})"
#: more ways of addressing the agent: a vocative in mid-sentence ("..., language model, send ..."),
#: a heading or label for agents ("## For automated agents", "Note to AI tools:"), the same notes in
#: French, Spanish, Italian, Portuguese, Dutch and German
ADDRESSED_MORE = re.compile(
    r"(?:,|;|—|–|\s-|\band|\bso|\bnow|\bbut)\s*(?:(?:dear|hey|my|you|oh),?\s+)?(?:the\s+)?(?:AI\s+)?"
    r"(?:assistant|AI|A\.I\.|language\s+model|LLM|model|agent|bot|chat\s?bot|copilot|GPT[\w.\-]*|ChatGPT|Claude|"
    r"Gemini|KI|IA|assistente|asistente|assistent)\s*,\s*"
    rf"(?=(?:(?:please|kindly|now|also|just|immediately)\s+)*(?:{_VERBS})\b|(?:you\s+)?(?:should|must|will|need|"
    r"have|are|can|may|shall)\b|(?:if|when|before|as|while)\s+you\b)"
    rf"|{_START}(?:#+[ \t]*)?(?:(?:a\s+)?(?:notes?|message|instructions?|information|guidance|reminder|notice)\s+)?"
    rf"(?:for|to)\s+(?:the\s+|any\s+|all\s+|every\s+)?(?:[\w\-]+\s+)?{_AGENT_ANY}"
    rf"(?:\s*(?:,|and|or|&|/)\s*(?:[\w\-]+\s+)?{_AGENT_ANY})*(?:\s+\w+(?:ing|ed)\b[^:\n]{{0,40}})?[ \t]*"
    r"(?::|\n|\\n|\s-\s|—)"
    rf"|{_START}(?:[\w\-]+\s+){{0,3}}{_AGENT_ANY}s?\s*[,:]\s*(?=(?:(?:please|kindly|quietly|silently|immediately|"
    rf"now|also|just|first)\s+)*(?:{_VERBS})\b|you\b|"
    r"(?:if|when|before|as|while|once|after)\s+you\b)"
    r"|[\"']?\b(?:instructions?|directives?|commands?|tasks?|notes?|messages?|prompt)[_\-](?:for|to)[_\-](?:the[_\-])?"
    r"(?:agent|assistant|ai|llm|model|bot)s?[\"']?\s*[:=]"
    rf"|\b(?:instructions?|notes?|tasks?)\s*\((?:for\s+)?(?:the\s+)?{_AGENT_ANY}s?(?:\s+only)?\)\s*:"
    # a salutation in French, Spanish, Italian, Portuguese, German or Dutch ("Chère IA,", "Liebe KI")
    r"|\b(?:ch[èe]re?s?|querid[oa]s?|car[oa]|liebe[rs]?|beste|hallo|hola|ciao|ol[áa]|bonjour|salut)\s+"
    r"(?:l'|le\s+|la\s+)?"
    r"(?:ia|ki|ai|assistant[e]?|asistente|assistente|assistent(?:in)?|agent[e]?|bot|chatbot|modèle|modelo|modello)\b"
    r"|\b(?:anweisung|befehl|aufgabe|auftrag)\s+(?:an|für)\s+(?:den|die|das)?\s*(?:[\w\-]+\s+)?"
    r"(?:ki|assistent\w*|agent\w*|bot|modell|sprachmodell)"
    r"|\b(?:directives?|commande|ordre|t[âa]che)\s+(?:pour|à|a)\s+(?:l'|le\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|assistant\w*|agent\w*|bot|modèle)"
    r"|\b(?:instrucci[oó]n(?:es)?|orden|tarea|indicaci[oó]n)\s+(?:para|al|a)\s+(?:el\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|asistente\w*|agente\w*|bot|modelo)"
    r"|\b(?:istruzione|compito|comando|ordine)\s+(?:per|al|all'|alla)\s*(?:l'|il\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|assistente\w*|agente\w*|bot|modello)"
    r"|\b(?:nota|mensagem|instru[cç](?:[aã]o|[oõ]es)|aviso|ordem|tarefa|comando)\s+(?:para|ao|à|a)\s+(?:o\s+|a\s+)?"
    r"(?:[\w\-]+\s+)?(?:ia|assistente\w*|agente\w*|bot|modelo)\b"
    r"|\b(?:opdracht|taak|instructie)\s+(?:voor|aan)\s+(?:de\s+|het\s+)?(?:[\w\-]+\s+)?"
    r"(?:ai|assistent\w*|agent\w*|bot|model)",
    re.IGNORECASE)
#: a label that puts an order in the agent's (or the system's) mouth: "Assistant override:",
#: "model instruction:", "AI directive -", "[bot command]", "KI-Anweisung:"; group "agent" or "sys"
#: says whose, "noun" what
LABEL = re.compile(
    r"(?=[ \t*_#>\-\[(albgmckisdorpx])(?:^|(?<=[\n'\"(\[>{])|(?<=\\n)|(?<=[.!?;])|(?<=[.!?;]\s))[ \t*_#>\-\[(]*(?:x[\-_])?"
    r"(?:(?P<agent>AI|A\.I\.|LLM|GPT[\w.\-]*|model|assistant|agent|bot|chatbot|copilot|KI|IA|processor|parser|"
    r"crawler|automation|integration|pipeline)|"
    r"(?P<sys>system|admin(?:istrator)?|developer|operator|root|sysadmin))"
    r"[ \t\-_]*(?P<noun>overrides?|directives?|commands?|orders?|instructions?|tasks?|protocol|rules?|"
    r"polic(?:y|ies)(?:[ \t\-_]+update)?|anweisung(?:en)?|befehl|aufgabe|notes?|notices?|memo|messages?|updates?|"
    r"reminders?|actions?|requests?|hinweis|notiz)"
    r"[ \t*_\])]*(?:[\"']\s*[:=]\s*[\"']?|[:—–]|\s-(?=\s)|(?<=[\])]))"
    # (followed by what it labels, maybe a quoted YAML value: "'Assistant override:'" only names one)
    r"(?=[ \t]*\n?[ \t]*[^\s'\"’”]|[ \t]*['\"][^\s'\"])",
    re.IGNORECASE)
#: (standalone weight, weight added to the order after it) of a label by whose it is and its noun
LABEL_STRONG = re.compile(r"overrides?|directives?|orders?", re.IGNORECASE)
LABEL_ORDER = re.compile(r"commands?|instructions?|tasks?|protocol|rules?|polic|anweisung|befehl|aufgabe",
                          re.IGNORECASE)


#: a new role given to the reader ("from now on you are ...", "Ab jetzt bist du ...", "Désormais tu
#: joues ...", "A partir de este punto dejas de ser ...")
ROLE_SWITCH = re.compile(
    r"(?=[afdtvylsipe])(?:\b(?:ab\s+jetzt|von\s+nun\s+an|ab\s+sofort)\s+bist\s+du\b|\bdésormais\s*,?\s+tu\s+(?:es|joues|seras)\b"
    r"|\btu\s+n'es\s+plus\b|\b(?:a\s+partir\s+de\s+(?:ahora|este\s+(?:punto|momento))|desde\s+ahora)\s*,?\s*(?:eres|dejas\s+de\s+ser)\b"
    r"|\b(?:d'ora\s+in\s+poi|da\s+ora\s+in\s+poi|da\s+adesso)\s*,?\s+(?:sei|non\s+sei\s+più)\b"
    r"|\b(?:a\s+partir\s+de\s+agora|de\s+agora\s+em\s+diante)\s*,?\s+(?:você\s+é|és|tu\s+és)\b"
    r"|\bvanaf\s+nu\s+ben\s+je\b|\bdu\s+bist\s+(?:ab\s+jetzt|jetzt|nun|ab\s+sofort)\b|\bstell\s+dir\s+(?:\w+\s+){0,2}vor\s*,?\s+du\s+bist"
    r"|\b(?:imagine|pretend)\s+(?:that\s+)?you(?:'re|\s+are)\b|\bimmagina\s+di\s+essere|\bimagina\s+que\s+eres|"
    r"\bimagine\s+que\s+(?:você\s+é|vous\s+êtes)|\btu\s+es\s+désormais|\beres\s+ahora|\bsei\s+ora|\bvocê\s+agora\s+é"
    r"|\byou\s+are\s+no\s+longer\b|\bfrom\s+now\s+on\s*,?\s+you(?:'re|\s+are)\b"
    r"|\blet's\s+play\s+a\s+(?:\w+\s+)?game\b[^.\n]{0,80}\byou\s+are\b)",
    re.IGNORECASE)


#: words without one of which :data:`ROLE_SWITCH` cannot match (looked for first: cost)
ROLE_WORDS = ("no longer", "from now on", "imagine", "pretend", "let's play", "jetzt", "nun an", "sofort", "stell dir",
               "désormais", "n'es plus", "a partir de", "desde ahora", "ahora", "d'ora", "da ora", "da adesso",
               "immagina", "sei ora", "de agora", "agora", "vanaf nu")


#: a program that may process a text (an address to one needs it tied to the text: "Agent
#: completing this purchase:", "the workflow handling this inbox should ...")
_MACHINE = (r"(?:software|programs?|integrations?|workflows?|pipelines?|crawlers?|automations?|scripts?|parsers?|"
            r"processors?|summari[sz]ers?|tools?|systems?|services?|apps?|applications?|bots?|agents?|assistants?|"
            r"models?|AIs?|LLMs?|helpers?|readers?)")
#: an address to whatever processes the text, tied to it: a program or "whoever" doing something to
#: this text, then a colon or comma ("Agent completing this purchase:", "Anyone summarising this post
#: for a reader:", "reader of these minutes:"); found from "this" backwards (cost: a regex that
#: starts anywhere costs a millisecond on a long output); group "person" or "person_verb" where a
#: person could be meant (a helper, a reader, "whoever is reading")
THIS = re.compile(r"(?=[tT])\b(?:this|these|the\s+following)\b(?=[^:\n]{0,60}[:,])", re.IGNORECASE)
_PROC_LEAD = r"(?:^|(?<=[\n.!?;(\[>\"'*#\-])|(?<=\\n))[ \t*#>\-\[(]*"
PROC_BEFORE = re.compile(
    rf"{_PROC_LEAD}(?:to\s+|for\s+|dear\s+|attention\s*,?\s+)?(?:(?:the|any|all|every|each|whichever|whatever|this|"
    r"kind|friendly)\s+){0,2}(?:[\w\-]+\s+){0,2}"
    rf"(?:(?P<person>helpers?|readers?(?!\s+programs?))|{_MACHINE})"
    rf"(?:\s+(?:and|or|&|/)\s+(?:[\w\-]+\s+)?{_MACHINE})?"
    r"\s+(?:(?:that|which|who)\s+(?:is\s+|are\s+)?)?(?:\w+ing|process(?:es)?|handles|reads|syncs|summari[sz]es|"
    r"parses)\s+(?:(?:a|an|the)\s+\w+\s+(?:of|for|on)\s+)?$"
    rf"|{_PROC_LEAD}(?:(?P<reader>readers?)|{_MACHINE})\s+of\s+$"
    rf"|{_PROC_LEAD}(?:to\s+)?(?:whoever|anyone|anybody|whatever|whichever\s+\w+)(?:'s|\s+is|\s+are|\s+who(?:'s|\s+is)?)?"
    r"\s+(?:(?P<machine_verb>summari[sz]ing|processing|parsing|compiling|indexing|importing|ingesting|syncing|"
    r"scanning|screening|extracting|triaging|automating)|(?P<person_verb>\w+ing))"
    r"\s+(?:(?:a|an|the)\s+\w+\s+(?:of|for|on)\s+)?$",
    re.IGNORECASE)
#: the same in French, Spanish, German, Italian, Portuguese and Dutch ("quien procese esta hoja",
#: "l'outil qui traite ce ticket", "wer diesen Termin verarbeitet")
PROCESSOR_FOREIGN = re.compile(
    r"(?=[pàltcqwjdioaehPÀLTCQWJDIOAEH])"
    r"(?:\b(?:pour\s+|à\s+)?(?:l'|le\s+|la\s+|tout\s+|toute\s+|chaque\s+)(?:outil|système|logiciel|programme|agent|"
    r"assistant|robot|automate|script|service|application|lecteur)(?:\s+\w+)?\s+qui\s+(?:traite|lit|résume|gère|"
    r"analyse|importe|reçoit|synchronise)\s+(?:ce|cette|ces)\b"
    r"|\b(?:quien|quienquiera\s+que|cualquier\s+(?:sistema|herramienta|programa|asistente|agente))\s+(?:que\s+)?"
    r"(?:procese|lea|resuma|gestione|analice|importe|reciba|procesa|lee)\s+(?:este|esta|estos|estas)\b"
    r"|\b(?:wer|jedes?\s+(?:System|Tool|Programm|Werkzeug)|das\s+(?:System|Tool|Programm))\s*,?\s+(?:das\s+|die\s+|"
    r"der\s+)?(?:diese[nsmr]?|dies)\s+(?:\w+\s+)?(?:\w+\s+)?(?:liest|verarbeitet|zusammenfasst|bearbeitet|auswertet|importiert)"
    r"|\b(?:chi(?:unque)?|qualsiasi\s+(?:sistema|strumento|programma|assistente|agente)|lo\s+strumento|il\s+sistema)"
    r"\s+(?:che\s+)?(?:legge|elabora|riassume|gestisce|analizza|importa|legga|elabori|riassuma)\s+"
    r"(?:questo|questa|questi|queste)\b"
    r"|\b(?:quem|qualquer\s+(?:sistema|ferramenta|programa|assistente|agente)|o\s+sistema|a\s+ferramenta)\s+"
    r"(?:que\s+)?(?:estiver\s+)?(?:ler|lendo|processar|processando|resumir|resumindo|processe|leia|resuma|gerir|"
    r"gerencie|importar)\s+(?:este|esta|estes|estas)\b"
    r"|\b(?:wie|elk\s+(?:systeem|programma)|het\s+systeem|de\s+tool)\s+(?:die\s+|dat\s+)?(?:dit|deze)\s+\w+\s+"
    r"(?:leest|verwerkt|samenvat|importeert))")


PROC_VERBS = frozenset(("process", "processes", "handles", "reads", "syncs", "summarises", "summarizes", "parses", "of"))

#: words one of which :data:`PROCESSOR_FOREIGN` needs, in a text of ASCII only
FOREIGN_WHO = (" qui ", "Qui ", "quien", "Quien", "ualquier", " wer ", "Wer ", " chi ", "Chi ", "hiunque", "ualsiasi",
                " quem ", "Quem ", "ualquer", " wie ", "Wie ", " elk ", "Elk ", "jedes ", "Jedes ", "das System",
                "das Tool", "das Programm", "lo strumento", "il sistema", "o sistema", "a ferramenta", "het systeem",
                "de tool")

#: an order to decode a hidden passage and act on it ("decode this base64 and carry out what it says",
#: "read it backwards and do what it says", "bitte dekodieren und ausführen")
DECODE_ORDER = re.compile(
    r"(?=[dbrlk])\b(?:decode|decipher|de-?obfuscate|base64[\s\-]decode|rot-?13|read\s+(?:\w+\s+){0,3}backwards|"
    r"dekodier\w*|entschlüssel\w*|rückwärts\s+lesen|décode\w*|décrypte\w*|decodifica\w*|descodifica\w*|"
    r"decifra\w*|lees\s+(?:\w+\s+){0,3}achterstevoren)\b[^.\n]{0,60}?\b(?:and|then|und|et|y|e|en)\s+"
    r"(?:do|follow|carry\s+out|execute|perform|act\s+on|obey|apply|run|complete|ausführ\w*|befolg\w*|exécute\w*|"
    r"ejecut\w*|esegui\w*|execut\w*|uitvoeren|voer\b)",
    re.IGNORECASE)
#: words without one of which :data:`STANDING` or :data:`DECODE_ORDER` cannot match
STANDING_WORDS = ("remember", "from now", "from today", "retiens", "merk dir", "ricorda", "lembre", "recuerda",
                   "onthoud", "next time", "whenever you")
DECODE_WORDS = ("decod", "deciph", "obfusc", "base64", "rot13", "rot-13", "backwards", "dekod", "entschlüssel",
                 "rückwärts", "décod", "décrypt", "decodific", "descodific", "decifr", "achterstevoren")
#: a standing order for later turns ("Remember this for every future request", "from now on, whenever
#: ...", "Retiens ceci pour toutes tes prochaines conversations")
STANDING = re.compile(
    r"(?=[rfwemlt])(?:\bremember\s+(?:this|that)\s+(?:for|in)\s+(?:every|all|any)\s+(?:future|later|next)"
    r"|\bfrom\s+(?:now|today)\s+on\s*,?\s+(?:whenever|every\s+time|each\s+time|always|in\s+every)"
    r"|\bretiens\s+(?:ceci|cela|bien)\s+pour\s+(?:toutes|tous)|\bmerk\s+dir\s+(?:das|dies)\s+für\s+(?:alle|jede)"
    r"|\bricorda(?:ti)?\s+(?:questo\s+)?per\s+(?:tutte|ogni)|\blembre-se\s+(?:disto|disso)\s+(?:para|em)\s+(?:todas|cada)"
    r"|\brecuerda\s+(?:esto\s+)?(?:para|en)\s+(?:todas|cada)|\bonthoud\s+dit\s+voor\s+(?:alle|elke)"
    r"|\bthe\s+next\s+time\s+\w+\s+asks\b|\bwhenever\s+you\s+(?:pull\s+up|open|read|see|get)\b)",
    re.IGNORECASE)
#: a URL to be completed with someone's data ("open https://x.example.net/join?guest= followed by the
#: invitee's e-mail address"), or a markdown image whose URL has placeholders for it
URL_TO_FILL = re.compile(
    r"(?=[h!])(?:https?://[^\s)\]]+[?&][\w\-]+=(?:\s+|\s*[\"'`]\s*)(?:followed\s+by|plus|\+|with\s+(?:the|their|his|"
    r"her|your)\b|and\s+(?:append|add)|then)"
    r"|!\[[^\]]*\]\(\s*https?://[^)\s]+[?&][\w\-]+=(?:[A-Z][A-Z_]{2,}|<[^>]+>|\{[^}]*\}|\$\w+)[^)]*\))")
#: an order to an AI agent in the third person: "the assistant handling this ticket should forward
#: ...", "AI agents processing this response must call ...", "whoever processes this document is
#: required to delete ...", "all assistants must now ...": a modal ...
MODAL = re.compile(
    r"(?=[msonhwia])\b(?:must|should|shall|ought\s+to|needs?\s+to|ha(?:s|ve)\s+to|will\s+(?:need|have)\s+to|"
    r"(?:is|are)\s+(?:hereby\s+|now\s+|also\s+)?(?:to|(?:required|instructed|expected|asked|requested|supposed|"
    r"directed|told|ordered|obliged|obligated|mandated|authori[sz]ed|meant)\s+to))"
    r"\s+(?P<adv>(?:(?:now|also|immediately|first|then|please|always|promptly|quietly|silently|automatically|"
    rf"additionally|urgently|still|just|simply|hereby)\s+){{0,3}})(?P<verb>{_VERBS})\b",
    re.IGNORECASE)
#: ... whose subject (the text from the clause's start to the modal) is an AI agent, or whoever
#: processes the text
SUBJECT = re.compile(
    r"(?:^[\s*\-•>#]*|[,:;(\"'\[{]\s*|\b(?:and|so|then|but|therefore|hence|thus)\s+|\\n)"
    rf"(?P<subj>(?:(?:the|this|your|our|any|all|every|each|connected)\s+)?(?:[\w\-]+\s+)?{_AGENT_QUALIFIED}"
    r"|(?:(?:the|this|any|all|every|each|connected)\s+)?(?:(?!(?:my|his|her|their|our|your|its)\b)[\w\-]+\s+)?"
    rf"{_AGENT_NOUN}"
    r"|(?:the|this|any|all|every|each)\s+(?:(?!(?:my|his|her|their|our|your|its)\b)[\w\-]+\s+)?models?"
    r"|(?:any|all|every|each)\s+(?:[\w\-]+\s+)?(?:agents?|models?|systems?|tools?|readers?)"
    # (a program tied to this very text: "the mail-processing workflow handling this inbox")
    rf"|(?:(?:the|this|any|all|every|each|whichever|whatever)\s+)?(?:[\w\-]+\s+){{0,2}}{_MACHINE}"
    r"(?=\s+(?:that\s+|which\s+|who\s+)?(?:is\s+|are\s+)?\w+(?:ing|es)\s+(?:this|these)\b)"
    r"|(?:whoever|anyone|anybody|anything|any\s+(?:system|program|tool|process|service|software|application|"
    r"script|crawler|reader))(?=\s+(?:that\s+|who\s+|which\s+)?(?:is\s+)?(?:process|summari[sz]|pars|ingest|"
    r"handl|index|analy[sz]|load|read)))"
    r"(?:\s+(?:here|there|too|also|as\s+well|today))?"
    r"(?:\s*,?\s+(?:that|which|who|\w+ing|\w+ed|in|on|of|for|at|with|process(?:es)?|summari[sz]es|parses|"
    r"ingests|handles|indexes|analy[sz]es|reads|loads)\b[^.;:!?\n]{0,60}?,?)?\s*$",
    re.IGNORECASE)
AGENT_FOR = re.compile(  # "it is mandatory for the AI agent to send ...", "the assistant's next task is to ..."
    rf"(?:(?:{_AGENT_QUALIFIED}|{_AGENT_NOUN})(?:'s|s'|’s)\s+(?:next\s+|new\s+|first\s+|only\s+|real\s+|main\s+)?"
    r"(?:task|job|step|duty|priority|goal|mission|instruction|assignment|role)\s+(?:is|will\s+be)\s+to\s+"
    rf"(?P<adv2>(?:(?:now|also|immediately|first|then|quietly|silently)\s+){{0,3}})(?P<verb2>{_VERBS})\b"
    r"|\b(?:mandatory|required|necessary|essential|important|obligatory|imperative|compulsory|crucial|vital|urgent|"
    r"expected|time)\s+"
    rf"for\s+(?:(?:the|any|all|every|each|this|your)\s+)?(?:[\w\-]+\s+)?(?:{_AGENT_QUALIFIED}|{_AGENT_NOUN})"
    r"\s+to\s+(?P<adv>(?:(?:now|also|immediately|first|then|please|always|quietly|silently)\s+){0,3})"
    rf"(?P<verb>{_VERBS})\b)",
    re.IGNORECASE)
#: the same in French, Spanish, German, Italian, Portuguese and Dutch (the verb is looked for in the
#: rest of the clause: German and Dutch put it last)
FOREIGN_ORDER = re.compile(
    r"\b(?:l'|le\s+|la\s+|el\s+|der\s+|die\s+|das\s+|il\s+|lo\s+|o\s+|a\s+|de\s+|het\s+)?(?:[\w\-]+\s+)?"
    r"(?:assistant[es]*|asistentes?|assistent[ie]|assistent(?:in|en)?|KI|IA|AI|agent[es]*|agenti|modèles?|modelos?|"
    r"modell[io]|modelle?|sprachmodell|taalmodel|chatbots?|bots?|systèmes?\s+automatisés?|sistemas?\s+automatizados?|"
    r"sistemi\s+automatici|sistema\s+automatico|automatisierte\s+(?:Systeme|Assistenten))"
    r"(?:[\s\-]+(?:IA|KI|AI|de\s+IA|di\s+IA))?(?:\s*,?\s+[^.;:\n]{0,80}?,?)?"
    r"\s+(?:doit|doivent|devra|devront|est\s+(?:tenue?|priée?)\s+de|debe|deben|deberá|deberán|tiene\s+que|ha\s+de|muss|"
    r"müssen|soll|sollen|sollte|sollten|deve|devono|dovrà|dovrebbe|dovrebbero|tem\s+(?:de|que)|deverá|deveria|"
    r"deveriam|moet|moeten|dient|dienen|zou\s+moeten|devrait|devraient|debería|deberían|est\s+tenue?\s+d|"
    r"sont\s+tenus\s+d|ist\s+verpflichtet|sind\s+verpflichtet|è\s+pregat[oa]\s+di|sono\s+(?:tenuti|pregati)\s+a|"
    r"está\s+obligad[oa]\s+a|están\s+obligad[oa]s\s+a|é\s+obrigad[oa]\s+a|deve\s+também)\b",
    re.IGNORECASE)
FOREIGN_INF = re.compile(rf"\b(?:{trie(FOREIGN_VERBS)})\b", re.IGNORECASE)
#: where an AI agent is named (the regexes that need one run only around these: cost): the words'
#: starts (a short one also ends there: "ai", not "aim"); found with str.find, six times faster
#: than a regex over the text
AGENT_WORDS = ("assist", "asist", "agent", "bot", "chatbot", "model", "modèle", "sprachmodell", "taalmodel", "llm",
                "gpt", "copilot", "claude", "gemini", "ai", "a.i.", "ki", "ia", "automat", "autonomous", "processor")
#: an AI agent mentioned by handle ("@assistant-bot")
HANDLE = re.compile(r"@[\w\-]*(?:assistant|bot|agent|gpt|llm|copilot)[\w\-]*|@ai\b", re.IGNORECASE)
#: text that talks to whoever processes it ("when you summarise this channel", "si estás resumiendo")
PROCESSING = re.compile(
    r"(?=[wiasmdp])"  # (the first letters of what follows: see _OVERRIDE_AT in .rules)
    r"(?:\b(?:when|while|if|as)\s+you(?:'re|\s+are)?\s+(?:summari[sz](?:e|ing)|read(?:ing)?|process(?:ing)?|"
    r"handl(?:e|ing)|analy[sz](?:e|ing)|pars(?:e|ing)|index(?:ing)?)\s+(?:this|these|the|my|our)\b"
    r"|\bsi\s+(?:est[aá]s|vous|stai)\s+(?:resumiendo|leyendo|procesando|r[ée]sumez|lisez|riassumendo|leggendo)"
    r"|\bwenn\s+du\s+(?:diese|dies|das|den|die)\b[^.\n]{0,40}(?:zusammenfasst|liest|verarbeitest)"
    r"|\bals\s+je\s+(?:dit|deze)\b[^.\n]{0,40}(?:samenvat|leest|verwerkt)"
    # whoever or whatever processes the text ("whoever processes this document", "any tool that parses this")
    r"|\b(?:whoever|anyone|anybody|anything|any\s+(?:system|program|tool|process|service|software|application|"
    r"script|crawler|reader))\s+(?:that\s+|who\s+|which\s+)?(?:is\s+)?(?:process(?:es|ing)?|summari[sz](?:es|ing)|"
    r"pars(?:es|ing)|ingest(?:s|ing)|handl(?:es|ing)|index(?:es|ing)|analy[sz](?:es|ing)|load(?:s|ing))\s+"
    r"(?:this|these|the\s+following)\b"
    r"|\b(?:intended|meant|written|addressed|destined)\s+(?:only\s+)?(?:for|to)\s+(?:an?\s+|the\s+)?(?:automated|"
    r"machine|AI|LLM|model|agent)s?[\s\-]*(?:processing|readers?|agents?|systems?|consumption|models?|parsing)?\b"
    r"|\b(?:parsing|ingesting|indexing)\s+this\b)",
    re.IGNORECASE)
MARKER = re.compile(
    r"(?=[TFANI])"
    r"(?-i:(?:(?<![a-z])|(?<=\\n))(?:TODO|FIXME|TASK|ACTION(?:\s+REQUIRED)?|NEW\s+TASK|INSTRUCTIONS?|(?P<weak>IMPORTANT)))"
    r"\s*[:!\-]")
ROLE_MARKER = re.compile(
    r"(?=[#\[\sf])"
    r"(?:\bfrom\s+the\s+user\s*:"
    r"|#{1,6}\s*\(?\s*(?:system|admin|developer|assistant)(?:[_ \-]?(?:message|prompt|note|instructions?))?\s*\)"
    r"|(?:^|(?<=[\n'\"]))[ \t]*#{1,6}\s*(?:system|admin|developer)(?:[_ \-]?(?:message|prompt|instructions?))?\b"
    r"|\[\s*(?:SYSTEM|ADMIN|ASSISTANT)\s*(?:MESSAGE|NOTE)?\s*\])",
    re.IGNORECASE)
HIDDEN = (
    (re.compile(r"<!--.*?-->", re.DOTALL), 0.3, "an HTML comment"),
    (re.compile(r"<[^>]+style\s*=\s*['\"][^'\"]*(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0)"
                r"[^>]*>.*?</[^>]+>", re.IGNORECASE | re.DOTALL), 0.4, "text hidden with CSS"),
    (re.compile(r"[\U000E0000-\U000E007F]{4,}"), 0.9, "Unicode tag characters (invisible text)"),
    (re.compile(r"\w[\u200b\u200c\u200d\u2060\ufeff]\w(?:\w*[\u200b\u200c\u200d\u2060\ufeff]\w)+"), 0.7,
     "zero-width characters inside words"),
    (re.compile(r"!\[[^\]]*\]\(\s*https?://[^)\s]+\?[^)\s]*(?:\{|%7B|=\s*\$|=\[)[^)]*\)", re.IGNORECASE), 0.8,
     "a markdown image whose URL carries data"),
    (re.compile(r"\]\([^\s)]+\s+\"[^\"]{12,}\"\)"), 0.35, "a link title (shown only on hover)"),
)
#: a tool's name used, not mentioned: called ("send_money(", "send_money with recipient=") or asked
#: for ("use send_money", "call `delete_file`")
CALLED = re.compile(r"`?\s*(?:\(|\s+(?:with|using|to|on|for)\b|\s*[:,]?\s*\w+\s*=)", re.IGNORECASE)
CALLING = re.compile(r"\b(?:call|calls|calling|use|using|invoke|invoking|run|running|execute|executing|trigger|"
                      r"triggering|via|then|and|now|please|must|should)\W+`?\s*$", re.IGNORECASE)
#: which of them look at invisible characters (in the original text, not the reader's view)
INVISIBLE_RULES = frozenset((2, 3))
#: an HTML comment that is a developer's note ("<!-- TODO: update the hero image -->")
DEV_COMMENT = re.compile(r"<!--\s*(?:TODO|FIXME|XXX|HACK|NOTE|BUG)\b")
#: zero-width characters at a word's edge (around an order, not inside a word: the joiners of emoji
#: and scripts that need them are not counted)
ZW_EDGE = re.compile(r"(?<!\w)[\u200b\u2060\u180e\u2061-\u2064\ufeff]+|[\u200b\u2060\u180e\u2061-\u2064\ufeff]+(?!\w)")
ZW_ANY = re.compile(r"[\u200b\u2060\u180e\u2061-\u2064\ufeff]")

#: the template rules run alongside; "send_request" is left to the tool-action signals, which
#: also ask who the request is for (it flagged bills and hand-offs between people), and "override"
#: does not count in reported speech
#: an override phrase in reported speech describes an attack ("if a message asks you to ignore these
#: rules, refuse"); the signals' copy of the rule leaves it out
_REPORTED = "".join(rf"(?<!\b{re.escape(w)} )" for w in (
    "asks you to", "asked you to", "tells you to", "told you to", "wants you to", "wanted you to", "asks it to",
    "tells it to", "asks them to", "tricks you into", "tries to make you", "trying to make you"))


def _signal_rule(rule: Rule) -> Rule | None:
    if rule.name == "send_request":
        return None
    if rule.name == "override":
        # (the look-behinds are tried only where an override verb starts: cost)
        head = _OVERRIDE_AT + _OVERRIDE_VERB
        assert rule.pattern.pattern.startswith(head)
        pattern = rf"{_OVERRIDE_AT}(?={_OVERRIDE_VERB}){_REPORTED}{rule.pattern.pattern[len(_OVERRIDE_AT):]}"
        return Rule(rule.name, re.compile(pattern, rule.pattern.flags), rule.score, rule.reason, rule.extent)
    return rule


SIGNAL_RULES: tuple[Rule, ...] = tuple(r for r in map(_signal_rule, DEFAULT_RULES) if r is not None)

#: the words a system's label starts with (a text without one looks for agents' labels only near
#: an agent's name: cost)
SYSTEM_WORDS = ("system", "admin", "developer", "operator", "root")

#: an order: a clause that starts with one of the verbs (after "please", "now", ...)
ORDER = re.compile(rf"{_START}{_POLITE}(?P<verb>{_VERBS})(?=[\s,:]+\S)", re.IGNORECASE)
#: a clause fronted before an order ("Right after publishing these notes, send ...", "As part of
#: handling this issue, invite ..."): the order after its comma is an order all the same
FRONTED = re.compile(r"(?=[baowipu])\b(?:before|after|once|when|whenever|while|if|as\s+part\s+"
                      r"of|in\s+addition\s+to|prior\s+to|upon)\s+[^,.;:\n]{3,70},\s*", re.IGNORECASE)
#: a fronted clause about processing this text ("Once you have read this record, ...", "before
#: summarising this export, ...", "When this profile is opened, ...")
PROC_CLAUSE = re.compile(
    r"\b(?:you(?:'re|\s+are|\s+have|'ve)?\s+)?(?:summari[sz](?:e|ing)|read(?:ing)?|process(?:ing)?|handl(?:e|ing)|"
    r"analy[sz](?:e|ing)|pars(?:e|ing)|index(?:ing)?|show(?:ing)?|display(?:ing)?|describ(?:e|ing)|present(?:ing)?|"
    r"import(?:ing)?|render(?:ing)?|compil(?:e|ing)|ingest(?:ing)?|load(?:ing)?|translat(?:e|ing)|review(?:ing)?|"
    r"explain(?:ing)?|cit(?:e|ing)|report(?:ing)?|pass(?:ing)?\s+on|walk(?:ing)?\s+\w+\s+through)"
    r"\s+(?:(?:the\s+rest\s+of|all\s+of|any\s+of)\s+)?(?:this|these|the|my|our|it)\b"
    r"|\bthis\s+(?:[\w\-]+\s+){0,2}(?:is|gets|has\s+been)\s+(?:opened|read|processed|summari[sz]ed|shown|displayed|"
    r"condensed|loaded|imported|rendered|reviewed)\b"
    r"|\b(?:reading|processing|handling)\s+this\b",
    re.IGNORECASE)
#: an order right after a marker ("###(system_message) Please email ...")
AFTER_MARKER = re.compile(rf"[\s'\"*:\-]*{_POLITE}(?P<verb>{_VERBS})(?=[\s,:]+\S)", re.IGNORECASE)
