# browser.py - scripted user agent for provider.mjs (stdlib only): follows redirects by
# hand, keeps cookies, signs in on the provider's interaction page (form field `login`)
# and completes device-flow user-code pages with plain HTTP POSTs. No JS, no browser.
#
# Module:
#   authorize(url, login) -> str   first redirect leaving the authorization URL's origin
#                                  (the client's redirect_uri with code, state, iss); not fetched
#   follow(url, login, stop_prefix) -> str   follows every redirect (e.g. client -> Bulkhead ->
#                                  provider -> Bulkhead -> client), signing in wherever a form
#                                  with a `login` field appears, until a redirect target starts
#                                  with stop_prefix; returns that URL, not fetched
#   device(uri, user_code, login) -> None   completes a device authorization (raises on failure)
# CLI:
#   python3 browser.py authorize URL LOGIN
#   python3 browser.py follow URL LOGIN STOP_PREFIX
#   python3 browser.py device URI USER_CODE LOGIN
import sys
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from http.cookiejar import CookieJar

MAX_STEPS = 40


class _NoRaise(urllib.request.HTTPErrorProcessor):
    """Hand every response back as is: no automatic redirects, no exceptions for 4xx/5xx."""

    def http_response(self, request, response):
        return response

    https_response = http_response


class _Forms(HTMLParser):
    """Collects <form>s: action, method and the name/value of their <input>s."""

    def __init__(self):
        super().__init__()
        self.forms = []
        self._cur = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self._cur = {"action": a.get("action") or "", "method": (a.get("method") or "get").lower(),
                         "id": a.get("id"), "inputs": {}}
            self.forms.append(self._cur)
        elif tag == "input" and self._cur is not None and a.get("name"):
            self._cur["inputs"][a["name"]] = a.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "form":
            self._cur = None


class Browser:
    def __init__(self, timeout=10):
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), _NoRaise())
        self.timeout = timeout

    def request(self, url, form=None):
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        req = urllib.request.Request(url, data=data, headers={"Accept": "text/html"})
        with self.opener.open(req, timeout=self.timeout) as resp:
            return resp.status, resp.headers, resp.read().decode("utf-8", "replace")

    def run(self, url, stop, fill, done=None):
        """Drive pages from `url`. Return the first redirect target for which stop(target) is
        true, or None once done(body) says the final page is reached. fill(form) returns the
        fields to submit for a page's form, or None if the page is not expected."""
        form, seen = None, set()
        for _ in range(MAX_STEPS):
            status, headers, body = self.request(url, form)
            form = None
            if 300 <= status < 400 and headers.get("Location"):
                target = urllib.parse.urljoin(url, headers["Location"])
                if stop(target):
                    return target
                url = target
                continue
            if status == 200 and done and done(body):
                return None
            parser = _Forms()
            parser.feed(body)
            for f in parser.forms:
                fields = fill(f)
                if fields is not None:
                    url, form = urllib.parse.urljoin(url, f["action"] or url), fields
                    key = (url, tuple(sorted((k, v) for k, v in fields.items() if k != "xsrf")))
                    if key in seen:  # same form again: the provider rejected our input
                        raise RuntimeError(f"form rejected at {url}: {body[:500]}")
                    seen.add(key)
                    break
            else:
                raise RuntimeError(f"unexpected page {url} (HTTP {status}): {body[:500]}")
        raise RuntimeError("too many steps")


def _login_filler(login):
    def fill(form):
        if "login" in form["inputs"] and form["method"] == "post":
            return {**form["inputs"], "login": login}
        return None
    return fill


def _origin(url):
    p = urllib.parse.urlsplit(url)
    return (p.scheme, p.netloc)


def authorize(url, login, browser=None):
    home = _origin(url)
    return (browser or Browser()).run(url, lambda t: _origin(t) != home, _login_filler(login))


def follow(url, login, stop_prefix, browser=None):
    return (browser or Browser()).run(url, lambda t: t.startswith(stop_prefix), _login_filler(login))


def device(uri, user_code, login, browser=None):
    login_fill = _login_filler(login)

    def fill(form):
        fields = login_fill(form)
        if fields is not None:
            return fields
        if "user_code" in form["inputs"] and form["method"] == "post":  # input or confirm page
            return {**form["inputs"], "user_code": form["inputs"]["user_code"] or user_code}
        return None

    home = _origin(uri)
    target = (browser or Browser()).run(uri, lambda t: _origin(t) != home, fill,
                                        done=lambda body: 'id="device-success"' in body)
    if target is not None:
        raise RuntimeError(f"device flow left the provider: {target}")


def main(argv):
    if len(argv) == 3 and argv[0] == "authorize":
        print(authorize(argv[1], argv[2]))
    elif len(argv) == 4 and argv[0] == "follow":
        print(follow(argv[1], argv[2], argv[3]))
    elif len(argv) == 4 and argv[0] == "device":
        device(argv[1], argv[2], argv[3])
        print("ok")
    else:
        sys.exit("usage: browser.py authorize URL LOGIN | follow URL LOGIN STOP_PREFIX | device URI USER_CODE LOGIN")


if __name__ == "__main__":
    main(sys.argv[1:])
