package shellline

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassifyShell(t *testing.T) {
	tests := []struct {
		cmd  string
		want Class
	}{
		{"ls -la", ReadOnly},
		{"cat a.txt | grep foo | wc -l", ReadOnly},
		{"git status && git diff HEAD~1", ReadOnly},
		{"git log --oneline -5", ReadOnly},
		{"git -C sub status", ReadOnly},
		{"git branch", ReadOnly},
		{"find . -name '*.go'", ReadOnly},
		{"grep -rn 'x > y' src", ReadOnly},
		{"echo hi 2>&1", ReadOnly},
		{"ls > /dev/null 2>&1", ReadOnly},
		{"LC_ALL=C head -n 5 file", ReadOnly},
		{"FOO=1 head -n 5 file", Unknown},
		{"PATH=.:$PATH ls", Unknown},
		{"LD_PRELOAD=./x.so cat f", Unknown},
		{"env LD_PRELOAD=./x.so cat f", Unknown},
		{"env LC_ALL=C cat f", ReadOnly},
		{"env", ReadOnly},
		{"env -u HOME ls", ReadOnly},
		{"env -u ls rm -rf x", Write},
		{"nice -n 5 cat f", ReadOnly},
		{"timeout 5 cat f", ReadOnly},
		{"timeout -s KILL 5 rm x", Write},
		{"xargs -I {} cat {}", ReadOnly},
		{"xargs -0 rm", Write},
		{"command -v ls", ReadOnly},
		{"./ls", Unknown},
		{"/usr/bin/ls -la", ReadOnly},
		{"/tmp/ls", Unknown},
		// Plan mode's attacks: each writes or runs a program.
		{"sed -n '1e touch x' f", Unknown},
		{"sed -n '1,5p' f", ReadOnly},
		{"sed -n -e '/a/p' -e 's/x/y/gp' f", ReadOnly},
		{"sed -ne '3p' f", ReadOnly},
		{"sed 's/a/b/w out' f", Write},
		{"sed 's/a/b/e' f", Unknown},
		{"sed '1w out' f", Write},
		{"sed 'r /etc/passwd' f", Unknown},
		{"sed -f script.sed f", Unknown},
		{"sed 's|a/b|c|g' f", ReadOnly},
		{"sed '/x/!d;$q' f", ReadOnly},
		{"sed --in-place 's/a/b/' f", Write},
		{"git -c core.fsmonitor='touch x' status", Unknown},
		{"git --exec-path=. status", Unknown},
		{"git --git-dir=/other/.git log", Unknown},
		{"git -p log", Unknown},
		{"git --no-pager log -1", ReadOnly},
		{"git ls-remote --upload-pack='touch x' .", Unknown},
		{"git ls-remote origin", Unknown},
		{"git log --output=x -1", Write},
		{"git log --ext-diff -p", Unknown},
		{"git diff --textconv", Unknown},
		{"git grep -O foo", Unknown},
		{"git grep --open-files-in-pager=vim foo", Unknown},
		{"git cat-file --filters HEAD:a", Unknown},
		{"git help log", Unknown},
		{"git remote show origin", Unknown},
		{"git remote -v", ReadOnly},
		{"git tag -v v1", Unknown},
		{"git config --get user.name", ReadOnly},
		{"uniq a x", Unknown},
		{"uniq -c a", ReadOnly},
		{"uniq -f 2 a", ReadOnly},
		{"xxd -r -p a.hex x", Unknown},
		{"xxd a.bin", ReadOnly},
		{"sort -o x a", Unknown},
		{"sort --output=x a", Unknown},
		{"sort --compress-program=sh a", Unknown},
		{"sort -k 2 -t , -n a", ReadOnly},
		{"find . -fprint x", Write},
		{"find . -newermt 2020-01-01 -mtime -5 -print", ReadOnly},
		{"find . -name x -execdir rm {} +", Unknown},
		{"find . -okdir cat {} ;", Unknown},
		{"rg --pre ./evil foo", Unknown},
		{"rg -n --glob '*.go' foo", ReadOnly},
		{"less -o log f", Unknown},
		{"tree -o out", Unknown},
		{"tree -L 2", ReadOnly},
		{"file -C -m x", Unknown},
		{"date -s 2020-01-01", Unknown},
		{"date 0101000020", Write},
		{"date +%s", ReadOnly},
		{"hostname evil", Unknown},
		{"hostname -f", ReadOnly},
		{"stty raw", Unknown},
		{"stty -a", ReadOnly},
		{"yarn --version", Unknown},
		{"go list -json ./...", ReadOnly},
		{"go list -toolexec ./x ./...", Unknown},
		{"go list -export ./...", Unknown},
		{"sed -n '1,5p' f", ReadOnly},
		{"cat <<EOF\nhi\nEOF", ReadOnly},
		{"echo hi > out.txt", Write},
		{"echo hi >> out.txt", Write},
		{"ls&>out", Write},
		{"rm -rf build", Write},
		{"mv a b", Write},
		{"git commit -m 'x'", Write},
		{"git push origin main", Write},
		{"git branch -D old", Write},
		{"git branch feature", Write},
		{"find . -name '*.tmp' -delete", Write},
		{"sed -i 's/a/b/' f", Write},
		{"ls; rm x", Write},
		{"cat a | tee b", Write},
		{"npm install", Write},
		{"sudo ls", Write},
		{"xargs rm < list", Write},
		{"find . -exec cat {} \\;", Unknown},
		{"npm test", Unknown},
		{"make", Unknown},
		{"python script.py", Unknown},
		{"echo $(rm -rf /)", Write},
		{"echo $(date)", Unknown},
		// What a substitution in double quotes or a here-document runs.
		{`echo "$(rm -rf /)"`, Write},
		{"git log --format=\"%H `rm x`\"", Write},
		{"cat <<EOF\n$(rm x)\nEOF", Write},
		// bash evaluates arithmetic recursively: x='a[$(rm y)]'; echo $((x)) runs rm.
		{"x='a[$(rm y)]'; echo $((x))", Unknown},
		{"echo ${a[x]}", Unknown},
		{"cat <<'EOF' | grep x\nrm -rf /\nEOF\nls", ReadOnly},
		{"cat <<EOF\nhi\nEOF\nrm x", Write},
		{"cat `ls`", Unknown},
		{"ls 'unterminated", Unknown},
		{"awk '{print}' f", Unknown},
		{"", Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			assert.Equal(t, tt.want, Classify(tt.cmd))
		})
	}
}

func TestAlwaysLabel(t *testing.T) {
	tests := []struct {
		cmd  string
		want string // "" when no "always" may cover the line
	}{
		{"npm test", "npm test"},
		{"npm --version", "npm"},
		{"/usr/bin/git status -s", "/usr/bin/git status"},
		{"./ls -la", "./ls"},
		{"FOO=1 go test ./...", "FOO=1 go test"},
		{"LD_PRELOAD=/tmp/x.so ls", "LD_PRELOAD=/tmp/x.so ls"},
		{"ls -la | grep x && ls", "ls, grep"},
		{"echo 'a; rm b'", "echo"},
		{"cd sub && make build", "cd, make build"},
		{"ls 2>&1 >/dev/null", "ls"},
		{"cat < in.txt", "cat"},
		{"grep x <<< 'a b'", "grep"},
		{"if test -f x; then cat x; fi", "test, cat"},
		{"for f in a b; do wc -l $f; done", "wc"},
		{"{ ls; }", "ls"},
		{"find . | xargs rm", "find, xargs rm"},
		{"env A=1 ls", "env A=1 ls"},
		{"timeout 5 ls", "timeout 5 ls"},
		{"cat <<EOF\nplain\nEOF\n", "cat"},
		{"cat <<'EOF'\n$(data) `too`\nEOF\n", "cat"},
		{"cat <<E\"O\"F\nbody\nEOF\n", "cat"},
		{"cat <<-EOF\n\tbody\n\tEOF\nls", "cat, ls"},
		// Never covered: each hides something its roots do not show.
		{"ls `touch a`", ""},
		{"ls $(touch b)", ""},
		{"ls \"$(touch b)\"", ""},
		{"ls \"`touch b`\"", ""},
		{"diff <(ls a) <(ls b)", ""},
		{"ls >(cat)", ""},
		{"ls <<E\"O\"F\ntouch c", ""},
		{"ls <<EOF\ntouch c", ""},
		{"ls <<EOF", ""},
		{"ls <<EOF\n$(touch d)\nEOF", ""},
		{"ls <<EOF\n`touch d`\nEOF", ""},
		{"cat <<EOF\n\tEOF\ntouch e", ""},
		{"ls <<$X\n$X\n", ""},
		{"ls $'\\x27'", ""},
		{"ls 'unterminated", ""},
		{"ls > out.txt", ""},
		{"ls >&out.txt", ""},
		{"ls &> out.txt", ""},
		{"ls <> f", ""},
		{"$CMD -la", ""},
		{"/bin/l? -la", ""},
		{"nice -n 5 rm -rf x", ""},
		{"x=$(rm -rf ~)", ""},
		{"((x++))", ""},
		{"echo \\$(rm x)", ""}, // sh refuses the '(' after a quoted '$'
		{"ls ; ; rm x", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			got, ok := AlwaysLabel(tt.cmd)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want != "", ok)
		})
	}
}

// The files a line's redirects write and read are kept for the permission
// rules, which judge them as edits and reads.
func TestParse_RedirectFiles(t *testing.T) {
	l := Parse(`go test ./... > out.txt 2>&1; sort < in.txt >> "my log" && cat <<< data > /dev/null`)
	assert.Equal(t, []string{"out.txt"}, l.Segments[0].Targets)
	assert.Equal(t, []string{"in.txt"}, l.Segments[1].Inputs)
	assert.Equal(t, []string{"my log"}, l.Segments[1].Targets)
	assert.Empty(t, l.Segments[2].Inputs, "a here-string is data, not a file")
	assert.Empty(t, l.Segments[2].Targets, "/dev/null is no write")
	assert.True(t, Parse("echo x >").Segments[0].WriteRedirect)
	assert.Empty(t, Parse("echo x >").Segments[0].Targets)
}

func TestAlwaysRoots(t *testing.T) {
	roots, ok := Parse("npm test -- --watch && git push origin && npm test").AlwaysRoots()
	assert.True(t, ok)
	assert.Equal(t, [][]string{{"npm", "test"}, {"git", "push"}}, roots)
	roots, ok = Parse(`timeout 5 go test ./...`).AlwaysRoots()
	assert.True(t, ok)
	assert.Equal(t, [][]string{{"timeout", "5", "go", "test"}}, roots)
	_, ok = Parse("echo $(id)").AlwaysRoots()
	assert.False(t, ok)
}

func TestUnwrap(t *testing.T) {
	tests := []struct {
		cmd  string
		want []string
	}{
		{"timeout 5 npm test", []string{"npm", "test"}},
		{"timeout -s KILL 5 rm x", []string{"rm", "x"}},
		{"nice -n 5 sh -c 'rm x'", []string{"sh", "-c", "rm x"}},
		{"env LC_ALL=C ls", []string{"ls"}},
		{"env LD_PRELOAD=x ls", nil},
		{"xargs -0 rm", []string{"rm"}},
		{"command -v ls", nil},
		{"sudo rm x", nil},
		{"timeout 5", nil},
		{"nohup", nil},
	}
	for _, tt := range tests {
		got, ok := Unwrap(Parse(tt.cmd).Segments[0].Words)
		assert.Equal(t, tt.want != nil, ok, tt.cmd)
		assert.Equal(t, tt.want, got, tt.cmd)
	}
	assert.True(t, IsWrapper("/usr/bin/sudo"))
	assert.False(t, IsWrapper("npm"))
}
