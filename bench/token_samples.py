"""Representative texts for measuring token estimates, one generator per category.

Each ``samples(category, seed, count)`` call returns chat-sized texts (a few
hundred to a few thousand characters) built deterministically from ``seed``:

- ``english``: assistant-style prose (sentences below, recombined);
- ``python``: slices of standard-library modules' source;
- ``json``: tool results (search hits, file listings, API records), pretty and compact;
- ``chinese`` / ``japanese``: conversational prose written for this file;
- ``emoji``: short chat lines dense with emoji, skin tones, ZWJ families and flags;
- ``blob``: pasted machine text: base64 of random bytes (bare, in a PEM block or
  a data URL), hex digests (a lock file's hashes, git commits), a JWT, UUIDs in
  JSON, a line of minified JavaScript;
- ``scripts`` (extra): accented Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai;
- ``logs`` (extra): number-heavy log lines and CSV rows;
- ``blob_fit`` (calibration only): bare base64 of random bytes and lists of hex digests.

The calibration script (``bench/calibrate_tokens.py``) fits on one seed and the
benchmark (``bench/agent.py``) measures on another, so the reported ratios are
not the fitted ones. Blobs are fitted on ``blob_fit`` only: the ``blob`` category
the benchmark measures has kinds the fit never saw.
"""

from __future__ import annotations

import base64
import inspect
import json
import random
import re
import uuid
from collections.abc import Callable
from typing import Final

__all__ = ["CATEGORIES", "EXTRA_CATEGORIES", "FIT_CATEGORIES", "samples"]

ENGLISH: Final = (
    "Sure, here is a short summary of what changed in the release.",
    "The gateway now keeps each conversation in its own lane, so two users never wait on each other.",
    "If the model times out, the request is retried twice with a growing delay before we give up.",
    "I could not find a file with that name in the project, but there is one called settings.yaml.",
    "You can set the limit per chat; the default is fifty messages an hour.",
    "That error usually means the token was revoked or copied with a trailing space.",
    "Let me know whether you want the longer version with the examples included.",
    "The meeting was moved to Thursday afternoon because half of the team is travelling on Wednesday.",
    "Compaction replaces the oldest turns with a summary and keeps the most recent ones verbatim.",
    "Honestly, the simplest fix is to restart the service and watch the log for a minute.",
    "Before we continue, could you paste the exact command you ran and the output it printed?",
    "Most of the time is spent waiting for the network, not in our own code.",
    "I've updated the document with your comments and highlighted the two paragraphs I wasn't sure about.",
    "Paris is lovely in the spring, although the museums get crowded around the Easter holidays.",
    "A good rule of thumb is to water the plant when the top two centimetres of soil feel dry.",
    "The recipe calls for three eggs, but two will do if you add a spoonful of yoghurt.",
    "Your flight leaves at 7:45 in the morning, so I'd set an alarm for half past five.",
    "We're still investigating the outage; the database recovered, but some messages were delayed.",
    "In short: it works, it's tested, and it's documented, but it isn't fast yet.",
    "Thanks for the detailed report! That made it much easier to reproduce the problem.",
    "The library's documentation recommends pinning the major version to avoid surprises.",
    "When you get a chance, please review the pull request; it touches the retry logic.",
    "There are three options here, and each one trades a little speed for a little safety.",
    "According to the forecast, it will rain most of the weekend, with sunny spells on Sunday evening.",
)

CHINESE: Final = (
    "好的，我来帮你总结一下这次更新的主要内容。",
    "如果模型在三十秒内没有回应，系统会自动重试两次。",
    "我在项目里没有找到这个文件，不过有一个名字很相似的配置文件。",
    "你可以为每个群聊单独设置限制，默认是每小时五十条消息。",
    "这个错误通常说明令牌已经失效，或者复制的时候多了一个空格。",
    "明天上午十点我们在三楼的会议室开会，请提前五分钟到。",
    "压缩会把最早的几轮对话换成一段摘要，最近的内容保持原样。",
    "说实话，最简单的办法是先重启服务，然后观察一分钟日志。",
    "继续之前，能不能把你运行的完整命令和输出贴出来？",
    "大部分时间都花在等待网络上，而不是我们自己的代码里。",
    "春天的杭州特别美，西湖边的柳树都发芽了，游客也比平时多。",
    "这道菜需要三个鸡蛋，如果只有两个，可以加一勺酸奶代替。",
    "你的航班早上七点四十五分起飞，建议五点半就起床。",
    "我们还在调查这次故障，数据库已经恢复，但部分消息有延迟。",
    "谢谢你详细的反馈！这让我们很快就复现了问题。",
    "这里有三种方案，每一种都在速度和安全性之间做了不同的取舍。",
    "天气预报说周末大部分时间会下雨，周日傍晚可能会转晴。",
    "孩子们放学以后常常去公园踢足球，一直玩到天黑才回家。",
    "我觉得这本书的前半部分写得很好，后面的情节有点拖沓。",
    "请注意，新版本不再支持旧的配置格式，升级前需要先迁移。",
    "奶奶每天早上都会去菜市场买新鲜的蔬菜和水果。",
    "这个问题我也不太确定，要不我们一起查一下官方文档？",
)

JAPANESE: Final = (
    "はい、今回のアップデートの主な変更点をまとめますね。",
    "モデルが三十秒以内に応答しない場合、システムは自動的に二回再試行します。",
    "プロジェクトの中にその名前のファイルは見つかりませんでしたが、似た名前の設定ファイルがあります。",
    "チャットごとに上限を設定できます。デフォルトは一時間あたり五十件です。",
    "このエラーは、トークンが無効になっているか、コピーしたときに空白が入ったことが原因であることが多いです。",
    "明日の午前十時に三階の会議室でミーティングがありますので、五分前に来てください。",
    "圧縮では古い会話を要約に置き換え、最近のやり取りはそのまま残します。",
    "正直に言うと、いちばん簡単なのはサービスを再起動して、しばらくログを見守ることです。",
    "続ける前に、実行したコマンドと出力をそのまま貼り付けていただけますか？",
    "ほとんどの時間はネットワークの待ち時間で、私たちのコードではありません。",
    "春の京都はとてもきれいで、桜の季節になると観光客でいっぱいになります。",
    "このレシピには卵が三つ必要ですが、二つしかなければヨーグルトを大さじ一杯加えてください。",
    "フライトは朝七時四十五分発なので、五時半には起きたほうがいいと思います。",
    "障害の原因はまだ調査中です。データベースは復旧しましたが、一部のメッセージが遅れています。",
    "詳しい報告をありがとうございます！おかげですぐに問題を再現できました。",
    "ここには三つの選択肢があり、それぞれ速さと安全性のバランスが違います。",
    "天気予報によると、週末はほとんど雨で、日曜日の夕方には晴れるそうです。",
    "子どもたちは放課後よく公園でサッカーをして、暗くなるまで遊んでいます。",
    "新しいバージョンでは古い設定形式がサポートされないので、アップグレードの前に移行が必要です。",
    "祖母は毎朝市場に行って、新鮮な野菜と果物を買ってきます。",
    "よくわからないので、一緒に公式ドキュメントを確認してみましょうか。",
    "コーヒーとケーキのセットを二つお願いします。",
)

SCRIPTS: Final = (
    "Könnten Sie mir bitte erklären, warum die Nachricht nicht zugestellt wurde?",
    "Die Größe der Datei überschreitet das Limit für Anhänge.",
    "Ich würde vorschlagen, dass wir das Treffen auf nächste Woche verschieben.",
    "Il faut redémarrer le service après avoir modifié la configuration.",
    "Je n'ai pas trouvé le fichier, mais il y a un répertoire qui s'appelle « données ».",
    "Le déjeuner est prêt ; est-ce que tu peux appeler les enfants ?",
    "¿Puedes enviarme el informe antes del viernes? Gracias de antemano.",
    "La reunión se canceló porque el señor García está enfermo.",
    "Привет! Я посмотрел логи, и похоже, что сервер перезапустился ночью.",
    "Спасибо за подробный отчёт, теперь ошибку легко воспроизвести.",
    "Завтра будет дождь, так что возьми зонтик.",
    "Καλημέρα! Το μήνυμα στάλθηκε με επιτυχία.",
    "Dziękuję za pomoc, wszystko działa poprawnie.",
    "Bugün hava çok güzel, parkta yürüyüş yapalım mı?",
    "Η συνάντηση μεταφέρθηκε για την Πέμπτη το απόγευμα.",
    "Cảm ơn bạn đã giúp đỡ, bây giờ mọi thứ đều hoạt động tốt.",
    "شكرا على المساعدة، كل شيء يعمل الآن بشكل صحيح.",
    "هل يمكنك إرسال التقرير قبل يوم الجمعة؟",
    "תודה רבה על העזרה, הכול עובד עכשיו.",
    "הפגישה נדחתה ליום חמישי אחר הצהריים.",
    "मदद के लिए धन्यवाद, अब सब कुछ ठीक से काम कर रहा है।",
    "क्या आप शुक्रवार से पहले रिपोर्ट भेज सकते हैं?",
    "ขอบคุณสำหรับความช่วยเหลือ ตอนนี้ทุกอย่างทำงานได้ดีแล้ว",
    "พรุ่งนี้ฝนจะตก อย่าลืมเอาร่มไปด้วย",
)

EMOJI: Final = (
    "😀", "😂", "🤣", "😍", "🥰", "😎", "🤔", "😅", "😭", "🙏", "👍", "👏", "🔥", "✨", "🎉",
    "❤️", "💯", "🚀", "✅", "❌", "⚠️", "🍕", "☕", "🌧️", "🌞", "🐶", "🐱", "🎂", "📦", "🛠️",
    "👍🏽", "👋🏻", "🙌🏾", "💪🏼", "🤷‍♀️", "🤦‍♂️", "👨‍👩‍👧", "👩‍💻", "🏳️‍🌈", "🇯🇵", "🇫🇷", "🇧🇷", "🇺🇸",
)  # fmt: skip

CHAT_WORDS: Final = (
    "lol", "omg", "yes", "no way", "same", "love it", "see you", "good morning", "happy birthday",
    "on my way", "thanks", "congrats", "so tired", "pizza tonight?", "ship it", "nice", "wow",
    "haha", "brb", "let's go", "miss you", "party time", "done", "coffee", "rain again",
)  # fmt: skip

PYTHON_MODULES: Final = (
    "textwrap", "json.decoder", "asyncio.queues", "shlex", "fractions", "heapq", "string",
    "calendar", "difflib", "argparse", "dataclasses", "functools", "contextlib", "ipaddress",
    "statistics", "csv", "configparser", "graphlib", "secrets", "bisect", "colorsys", "gettext",
)  # fmt: skip


def _prose(pool: tuple[str, ...], joiner: str) -> Callable[[random.Random], str]:
    def make(rng: random.Random) -> str:
        paragraphs = []
        for _ in range(rng.randint(1, 3)):
            paragraphs.append(joiner.join(rng.sample(pool, rng.randint(2, 6))))
        return "\n\n".join(paragraphs)

    return make


def _python(rng: random.Random) -> str:
    module = __import__(rng.choice(PYTHON_MODULES), fromlist=["_"])
    lines = inspect.getsource(module).splitlines()
    start = rng.randrange(0, max(1, len(lines) - 80))
    return "\n".join(lines[start : start + rng.randint(15, 70)])


_VOCABULARY: Final = tuple(sorted({w.lower() for s in ENGLISH for w in re.findall(r"[A-Za-z]{3,}", s)}))


def _word(rng: random.Random) -> str:
    return rng.choice(_VOCABULARY)


def _date(rng: random.Random) -> str:
    return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _record(rng: random.Random) -> dict[str, object]:
    kind = rng.choice(("hit", "file", "issue"))
    if kind == "hit":
        return {
            "title": " ".join(_word(rng).capitalize() for _ in range(rng.randint(3, 8))),
            "url": f"https://{_word(rng)}.example.com/{_word(rng)}/{rng.randint(1, 99999)}",
            "snippet": " ".join(_word(rng) for _ in range(rng.randint(8, 25))) + ".",
            "score": round(rng.random(), 4),
        }
    if kind == "file":
        return {
            "path": "/".join(_word(rng) for _ in range(rng.randint(2, 5))) + rng.choice((".py", ".md", ".json")),
            "size": rng.randint(0, 2_000_000),
            "modified": f"{_date(rng)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z",
            "is_dir": rng.random() < 0.2,
        }
    return {
        "id": rng.randint(1000, 99999),
        "sha": f"{rng.getrandbits(160):040x}",
        "state": rng.choice(("open", "closed")),
        "labels": [_word(rng) for _ in range(rng.randint(0, 3))],
        "assignee": None if rng.random() < 0.3 else {"login": _word(rng), "id": rng.randint(1, 10**8)},
        "body": " ".join(_word(rng) for _ in range(rng.randint(5, 30))),
    }


def _json(rng: random.Random) -> str:
    payload = {"ok": True, "count": 0, "results": [_record(rng) for _ in range(rng.randint(2, 12))]}
    payload["count"] = len(payload["results"])  # type: ignore[arg-type]
    indent = rng.choice((None, 2))
    return json.dumps(payload, indent=indent, ensure_ascii=False)


def _emoji_chat(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(4, 14)):
        words = [rng.choice(CHAT_WORDS) for _ in range(rng.randint(0, 2))]
        marks = "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 5)))
        lines.append(" ".join([*words, marks]) if words else marks)
    return "\n".join(lines)


def _logs(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(5, 30)):
        stamp = f"{_date(rng)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.random() * 60:06.3f}"
        address = ".".join(str(rng.randint(1, 254)) for _ in range(4))
        level = rng.choice(("INFO", "WARNING", "ERROR", "DEBUG"))
        lines.append(
            f"{stamp} {level} {address}:{rng.randint(1024, 65535)} {_word(rng)}.{_word(rng)} "
            f"took={rng.randint(1, 99999)}ms bytes={rng.randint(0, 10**7)} status={rng.choice((200, 204, 404, 500))}"
        )
    if rng.random() < 0.5:
        lines = [",".join(str(round(rng.gauss(0, 1000), rng.randint(0, 4))) for _ in range(8)) for _ in lines]
    return "\n".join(lines)


def _random_bytes(rng: random.Random, low: int, high: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(low, high)))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _blob_fit(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return base64.b64encode(_random_bytes(rng, 24, 3000)).decode()
    return "\n".join(_random_bytes(rng, 16, 32).hex() for _ in range(rng.randint(1, 30)))


def _pem(rng: random.Random) -> str:
    body = base64.b64encode(_random_bytes(rng, 300, 1500)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "Here is the certificate:\n-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----"


def _data_url(rng: random.Random) -> str:
    image = base64.b64encode(_random_bytes(rng, 100, 2000)).decode()
    return f'The logo is inlined: <img alt="{_word(rng)}" src="data:image/png;base64,{image}">'


def _lock_file(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(2, 10)):
        lines.append(f"{_word(rng)}-{_word(rng)}=={rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 9)} \\")
        lines += [f"    --hash=sha256:{_random_bytes(rng, 32, 32).hex()}" for _ in range(rng.randint(1, 3))]
    return "\n".join(lines)


def _git_log(rng: random.Random) -> str:
    entries = []
    for _ in range(rng.randint(2, 8)):
        entries.append(
            f"commit {_random_bytes(rng, 20, 20).hex()}\nAuthor: {_word(rng).capitalize()} <{_word(rng)}@example.com>\n\n"
            f"    {' '.join(_word(rng) for _ in range(rng.randint(3, 9)))}"
        )
    return "\n\n".join(entries)


def _jwt(rng: random.Random) -> str:
    header = {"alg": rng.choice(("HS256", "RS256")), "typ": "JWT"}
    claims = {"sub": str(rng.randint(10**6, 10**9)), "name": _word(rng).capitalize(), "iat": rng.randint(1_600_000_000, 1_800_000_000),
              "scope": " ".join(_word(rng) for _ in range(rng.randint(1, 4)))}  # fmt: skip
    parts = [_b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)]
    token = ".".join([*parts, _b64url(_random_bytes(rng, 32, 256))])
    return f"The request fails with this header:\nAuthorization: Bearer {token}"


def _uuids(rng: random.Random) -> str:
    rows = [{"id": str(uuid.UUID(bytes=_random_bytes(rng, 16, 16))), "name": _word(rng)} for _ in range(rng.randint(2, 20))]
    return json.dumps(rows, indent=rng.choice((None, 2)))


def _minified_js(rng: random.Random) -> str:
    names = [*"etnrioasu", *(_word(rng) for _ in range(6))]
    statements = (
        lambda: f"var {rng.choice(names)}={rng.choice(names)}.{_word(rng)}({rng.choice(names)},{rng.randint(0, 999)})",
        lambda: f"function {rng.choice(names)}({rng.choice(names)},{rng.choice(names)}){{return {rng.choice(names)}+{rng.choice(names)}}}",
        lambda: f'if(!{rng.choice(names)})throw new Error("{_word(rng)} {_word(rng)}")',
        lambda: f"for(var {rng.choice(names)}=0;{rng.choice(names)}<{rng.choice(names)}.length;{rng.choice(names)}++)"
        f"{rng.choice(names)}.push({rng.choice(names)}[{rng.choice(names)}])",
        lambda: f'{rng.choice(names)}.{_word(rng)}=function(){{return"{_word(rng)}"===typeof {rng.choice(names)}}}',
    )
    return "!function(){" + ";".join(rng.choice(statements)() for _ in range(rng.randint(10, 80))) + "}();"


_BLOBS: Final = (_pem, _data_url, _lock_file, _git_log, _jwt, _uuids, _minified_js)


def _blob(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return f"Decode this for me: {base64.b64encode(_random_bytes(rng, 24, 2000)).decode()}"
    return rng.choice(_BLOBS)(rng)


_MAKERS: Final[dict[str, Callable[[random.Random], str]]] = {
    "english": _prose(ENGLISH, " "),
    "python": _python,
    "json": _json,
    "chinese": _prose(CHINESE, ""),
    "japanese": _prose(JAPANESE, ""),
    "emoji": _emoji_chat,
    "scripts": _prose(SCRIPTS, " "),
    "logs": _logs,
    "blob": _blob,
    "blob_fit": _blob_fit,
}
CATEGORIES: Final = ("english", "python", "json", "chinese", "japanese", "emoji", "blob")
"""The categories the benchmark's target covers."""
EXTRA_CATEGORIES: Final = ("scripts", "logs")
"""Measured and reported, but not part of the target range."""
FIT_CATEGORIES: Final = (*(c for c in CATEGORIES if c != "blob"), *EXTRA_CATEGORIES, "blob_fit")
"""What the calibration fits on: ``blob`` is measured on kinds of blob the fit never saw."""


def samples(category: str, *, seed: int, count: int) -> list[str]:
    """``count`` texts of ``category``, the same ones for the same seed."""
    rng = random.Random(f"{category}:{seed}")
    return [_MAKERS[category](rng) for _ in range(count)]
