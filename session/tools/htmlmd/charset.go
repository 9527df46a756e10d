package htmlmd

import (
	"bytes"
	"mime"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
)

// labels maps the charset names pages use to decoders. The x/text
// encoding packages cost little at start-up (their tables are static
// data); the index packages that name them cost more (x/text/language
// builds its tables in init), so the names are kept here. The map itself,
// like this package's tag sets, is built on first use rather than by
// package initialization, which every start of acpd pays before it
// answers initialize, web page fetched or not.
var labels = sync.OnceValue(func() map[string]encoding.Encoding {
	return map[string]encoding.Encoding{
		"utf-8": unicode.UTF8, "utf8": unicode.UTF8, "unicode-1-1-utf-8": unicode.UTF8,
		"utf-16le": unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), "utf-16": unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM),
		"utf-16be": unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM),
		// Browsers read the Latin-1 and ASCII labels as windows-1252, its superset.
		"windows-1252": charmap.Windows1252, "cp1252": charmap.Windows1252, "x-cp1252": charmap.Windows1252,
		"iso-8859-1": charmap.Windows1252, "iso8859-1": charmap.Windows1252, "latin1": charmap.Windows1252,
		"l1": charmap.Windows1252, "us-ascii": charmap.Windows1252, "ascii": charmap.Windows1252,
		"iso_8859-1": charmap.Windows1252, "cp819": charmap.Windows1252, "ibm819": charmap.Windows1252,
		"iso-8859-2": charmap.ISO8859_2, "latin2": charmap.ISO8859_2,
		"iso-8859-3": charmap.ISO8859_3, "iso-8859-4": charmap.ISO8859_4,
		"iso-8859-5": charmap.ISO8859_5, "cyrillic": charmap.ISO8859_5,
		"iso-8859-6": charmap.ISO8859_6, "arabic": charmap.ISO8859_6,
		"iso-8859-7": charmap.ISO8859_7, "greek": charmap.ISO8859_7,
		"iso-8859-8": charmap.ISO8859_8, "hebrew": charmap.ISO8859_8, "iso-8859-8-i": charmap.ISO8859_8,
		"iso-8859-9": charmap.Windows1254, "latin5": charmap.Windows1254,
		"iso-8859-10": charmap.ISO8859_10, "iso-8859-13": charmap.ISO8859_13,
		"iso-8859-14": charmap.ISO8859_14, "iso-8859-15": charmap.ISO8859_15, "latin9": charmap.ISO8859_15,
		"iso-8859-16": charmap.ISO8859_16,
		"koi8-r":      charmap.KOI8R, "koi8": charmap.KOI8R, "koi8-u": charmap.KOI8U,
		"macintosh": charmap.Macintosh, "mac": charmap.Macintosh, "x-mac-cyrillic": charmap.MacintoshCyrillic,
		"ibm866": charmap.CodePage866, "cp866": charmap.CodePage866,
		"windows-874": charmap.Windows874, "tis-620": charmap.Windows874,
		"windows-1250": charmap.Windows1250, "cp1250": charmap.Windows1250,
		"windows-1251": charmap.Windows1251, "cp1251": charmap.Windows1251,
		"windows-1253": charmap.Windows1253, "cp1253": charmap.Windows1253,
		"windows-1254": charmap.Windows1254, "cp1254": charmap.Windows1254,
		"windows-1255": charmap.Windows1255, "cp1255": charmap.Windows1255,
		"windows-1256": charmap.Windows1256, "cp1256": charmap.Windows1256,
		"windows-1257": charmap.Windows1257, "cp1257": charmap.Windows1257,
		"windows-1258": charmap.Windows1258, "cp1258": charmap.Windows1258,
		"shift_jis": japanese.ShiftJIS, "shift-jis": japanese.ShiftJIS, "sjis": japanese.ShiftJIS,
		"windows-31j": japanese.ShiftJIS, "ms_kanji": japanese.ShiftJIS, "x-sjis": japanese.ShiftJIS,
		"euc-jp": japanese.EUCJP, "x-euc-jp": japanese.EUCJP, "iso-2022-jp": japanese.ISO2022JP,
		"euc-kr": korean.EUCKR, "ks_c_5601-1987": korean.EUCKR, "windows-949": korean.EUCKR, "cp949": korean.EUCKR,
		"gbk": simplifiedchinese.GBK, "gb2312": simplifiedchinese.GBK, "x-gbk": simplifiedchinese.GBK,
		"cp936": simplifiedchinese.GBK, "windows-936": simplifiedchinese.GBK, "chinese": simplifiedchinese.GBK,
		"gb18030": simplifiedchinese.GB18030, "hz-gb-2312": simplifiedchinese.HZGB2312,
		"big5": traditionalchinese.Big5, "big5-hkscs": traditionalchinese.Big5, "x-x-big5": traditionalchinese.Big5,
		"cn-big5": traditionalchinese.Big5,
	}
})

// lookup names the decoder for a charset label; nil for an unknown one.
func lookup(label string) encoding.Encoding {
	return labels()[strings.ToLower(strings.Trim(label, " \t\n\r\f\"'"))]
}

// DecodeHTML returns body as UTF-8, decoded from the charset a BOM, the
// Content-Type header or a <meta> element in the first 1024 bytes names, in
// that order; a body without one is taken as UTF-8 when it is valid UTF-8
// and as windows-1252 (what browsers assume) when not.
func DecodeHTML(body []byte, ctype string) string {
	enc := sniff(body, ctype)
	if enc == nil {
		if utf8.Valid(body) {
			return string(body)
		}
		enc = charmap.Windows1252
	}
	if enc == unicode.UTF8 {
		body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	if b, err := enc.NewDecoder().Bytes(body); err == nil {
		body = b
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}

// DecodeText returns body as UTF-8: decoded from the charset the header
// names, else taken as UTF-8 with invalid bytes replaced.
func DecodeText(body []byte, ctype string) string {
	if _, params, err := mime.ParseMediaType(ctype); err == nil && params["charset"] != "" {
		if enc := lookup(params["charset"]); enc != nil && enc != unicode.UTF8 {
			if b, err := enc.NewDecoder().Bytes(body); err == nil {
				body = b
			}
		}
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}

func sniff(body []byte, ctype string) encoding.Encoding {
	switch {
	case bytes.HasPrefix(body, []byte("\xef\xbb\xbf")):
		return unicode.UTF8
	case bytes.HasPrefix(body, []byte("\xfe\xff")):
		return unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM)
	case bytes.HasPrefix(body, []byte("\xff\xfe")):
		return unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM)
	}
	if _, params, err := mime.ParseMediaType(ctype); err == nil {
		if enc := lookup(params["charset"]); enc != nil {
			return enc
		}
	}
	head := body[:min(len(body), 1024)]
	return metaCharset(string(head))
}

// metaCharset finds <meta charset=...> or <meta http-equiv content="...;
// charset=..."> in head.
func metaCharset(head string) encoding.Encoding {
	lower := strings.ToLower(head)
	for i := 0; ; {
		j := strings.Index(lower[i:], "<meta")
		if j < 0 {
			return nil
		}
		i += j + len("<meta")
		end := strings.IndexByte(lower[i:], '>')
		if end < 0 {
			return nil
		}
		_, attrs, _ := parseTag("<meta"+head[i:i+end+1], 0)
		for _, a := range attrs {
			switch a.key {
			case "charset":
				if enc := lookup(a.val); enc != nil {
					return fromMeta(enc)
				}
			case "content":
				if _, params, err := mime.ParseMediaType(a.val); err == nil {
					if enc := lookup(params["charset"]); enc != nil {
						return fromMeta(enc)
					}
				}
			}
		}
		i += end
	}
}

// fromMeta reads a <meta> naming UTF-16 as UTF-8, as browsers do: a page
// that could be read far enough to find it was not UTF-16.
func fromMeta(enc encoding.Encoding) encoding.Encoding {
	if enc == labels()["utf-16le"] || enc == labels()["utf-16be"] {
		return unicode.UTF8
	}
	return enc
}
