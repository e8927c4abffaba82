package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryObjectFileIsInAMigration: the landed migrations hold the current
// text of every object file, so the generator has nothing to write. (The
// drift test proves the same against a database.)
func TestEveryObjectFileIsInAMigration(t *testing.T) {
	objects, err := readObjects("../../sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) < 10 {
		t.Fatalf("read %d object files: wrong directory?", len(objects))
	}
	ups, _ := filepath.Glob("../../sql/migrations/*.up.sql")
	var texts []string
	for _, p := range ups {
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(body))
	}
	if up, _ := plan(objects, texts); up != nil {
		t.Fatalf("object files not in any migration: %d, first:\n%s", len(up), up[0])
	}
}

// TestPlanOrdersAndReverses: a changed PL/pgSQL function, a new SQL-bodied
// function, a new view and a new trigger come out in creation order; the down
// restores the previous text in the same order, then drops the new ones in
// reverse.
func TestPlanOrdersAndReverses(t *testing.T) {
	old := "-- Functions (current text...).\n\n-- f: old why.\nCREATE OR REPLACE FUNCTION convo.f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$;\n\n-- g: other.\nSELECT 1;\n"
	objects := []object{
		{"functions", "f", "-- f: new why.\nCREATE OR REPLACE FUNCTION convo.f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 2; END $$;\n"},
		{"functions", "h", "-- h: new.\nCREATE OR REPLACE FUNCTION convo.h()\nRETURNS int\nLANGUAGE sql\nRETURN 1;\n"},
		{"private", "p", "-- p: new.\nCREATE OR REPLACE FUNCTION convo_private.p()\nRETURNS int\nLANGUAGE plpgsql AS $$ BEGIN RETURN 3; END $$;\n"},
		{"triggers", "t", "-- t: new.\nCREATE OR REPLACE TRIGGER t AFTER INSERT ON convo.messages FOR EACH ROW EXECUTE FUNCTION convo.x();\n"},
		{"views", "v", "-- v: new.\nCREATE OR REPLACE VIEW convo.v AS SELECT 1;\n"},
		{"functions", "g", "-- g: other.\nSELECT 1;\n"},
	}
	up, down := plan(objects, []string{old})
	var names []string
	for _, u := range up {
		names = append(names, strings.SplitN(strings.TrimPrefix(u, "-- "), ":", 2)[0])
	}
	if got := strings.Join(names, ","); got != "f,p,h,v,t" {
		t.Fatalf("up order = %s, want f,p,h,v,t", got)
	}
	want := []string{
		"-- f: old why.\nCREATE OR REPLACE FUNCTION convo.f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$;",
		"DROP TRIGGER t ON convo.messages;",
		"DROP VIEW convo.v;",
		"DROP FUNCTION convo.h;",
		"DROP FUNCTION convo_private.p;",
	}
	if strings.Join(down, "\n|\n") != strings.Join(want, "\n|\n") {
		t.Fatalf("down =\n%s\nwant\n%s", strings.Join(down, "\n|\n"), strings.Join(want, "\n|\n"))
	}
}

// TestSQLBodiedFunctionsComeAfterWhatTheyCall: a SQL-bodied function is
// created after the SQL-bodied functions its body calls, whatever their names.
func TestSQLBodiedFunctionsComeAfterWhatTheyCall(t *testing.T) {
	objects := []object{
		{"private", "a_uses_b", "-- a_uses_b: x.\nCREATE OR REPLACE FUNCTION convo_private.a_uses_b()\nRETURNS int\nLANGUAGE sql\nRETURN convo_private.b_uses_c();\n"},
		{"private", "b_uses_c", "-- b_uses_c: x.\nCREATE OR REPLACE FUNCTION convo_private.b_uses_c()\nRETURNS int\nLANGUAGE sql\nRETURN convo.c();\n"},
		{"functions", "c", "-- c: x.\nCREATE OR REPLACE FUNCTION convo.c()\nRETURNS int\nLANGUAGE sql\nRETURN 1;\n"},
	}
	up, _ := plan(objects, nil)
	var names []string
	for _, u := range up {
		names = append(names, strings.SplitN(strings.TrimPrefix(u, "-- "), ":", 2)[0])
	}
	if got := strings.Join(names, ","); got != "c,b_uses_c,a_uses_b" {
		t.Fatalf("up order = %s, want c,b_uses_c,a_uses_b", got)
	}
}

// TestPreviousIsTheObjectItself: a comment line of another object that
// begins with the name (a wrapped "-- f: ..." inside g's comment) is not f's
// previous text; f's own definition, in an older migration, is.
func TestPreviousIsTheObjectItself(t *testing.T) {
	older := "-- f: the first why.\nCREATE OR REPLACE FUNCTION convo.f() RETURNS int LANGUAGE sql RETURN 1;\n"
	newer := "-- g: a comment that wraps onto a line that reads\n-- f: as if it opened f.\nCREATE OR REPLACE FUNCTION convo_private.g() RETURNS int LANGUAGE sql RETURN 2;\n"
	got := previous([]string{older, newer}, object{"functions", "f", ""})
	if want := strings.TrimSpace(older); got != want {
		t.Fatalf("previous = %q, want %q", got, want)
	}
}

// TestTextsNeverActAsTheOwner: neither the up nor the down switches to the
// owner role; each takes the membership a migrating role needs, hands what
// it created over, applies the grants, and gives the membership back, in
// that order. The migration that brings hand_over_objects drops it going
// down only after calling it.
func TestTextsNeverActAsTheOwner(t *testing.T) {
	for _, handOverIsNew := range []bool{false, true} {
		down := []string{"-- f: old.\nCREATE OR REPLACE FUNCTION convo.f() RETURNS int LANGUAGE sql RETURN 1;", "DROP FUNCTION convo.g;"}
		if handOverIsNew {
			down = append(down, "DROP FUNCTION convo_private."+handOver+";")
		}
		up, downText := texts("0099_x", []string{"-- f: new.\nCREATE OR REPLACE FUNCTION convo.f() RETURNS int LANGUAGE sql RETURN 2;"}, down)
		for name, text := range map[string]string{"up": up, "down": downText} {
			for _, asOwner := range []string{"set_config('role'", "SET ROLE", "SET LOCAL ROLE"} {
				if strings.Contains(text, asOwner) {
					t.Fatalf("the %s switches role (%s):\n%s", name, asOwner, text)
				}
			}
			order := []string{
				"EXECUTE format('GRANT convo_owner TO %I', current_user);",
				"CREATE OR REPLACE FUNCTION convo.f()",
				"SELECT convo_private.hand_over_objects();",
				"SELECT convo_private.apply_grants();",
				"EXECUTE format('REVOKE convo_owner FROM %I'",
			}
			if handOverIsNew && name == "down" {
				order = append(order[:4:4], "DROP FUNCTION convo_private.hand_over_objects;", order[4])
			}
			at := 0
			for _, s := range order {
				i := strings.Index(text[at:], s)
				if i < 0 {
					t.Fatalf("the %s (hand_over_objects new: %v) lacks %q after byte %d:\n%s", name, handOverIsNew, s, at, text)
				}
				at += i + len(s)
			}
			if n := strings.Count(text, "hand_over_objects"); n != map[bool]int{false: 1, true: 3}[handOverIsNew && name == "down"] {
				t.Fatalf("the %s names hand_over_objects %d times:\n%s", name, n, text)
			}
		}
	}
}

// TestPlanCreatesTheListedTriggersAgain: a migration that changes the
// list of the package's triggers ends its objects by creating them again,
// and so does its down, with the list it restores; unless the function
// that creates them is new there, and is dropped going down.
func TestPlanCreatesTheListedTriggersAgain(t *testing.T) {
	list := func(why string) object {
		return object{"private", triggerList, "-- package_triggers: " + why + "\nCREATE OR REPLACE FUNCTION convo_private.package_triggers()\nRETURNS int\nLANGUAGE sql\nRETURN 1;\n"}
	}
	creator := object{"private", createTriggers, "-- create_triggers: x.\nCREATE OR REPLACE FUNCTION convo_private.create_triggers() RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$;\n"}
	old := list("old.").text + "\n" + creator.text
	up, down := plan([]object{list("new."), creator}, []string{old})
	if up[len(up)-1] != createTriggersCall || down[len(down)-1] != createTriggersCall {
		t.Fatalf("a changed list: up ends %q, down ends %q; want both %q", up[len(up)-1], down[len(down)-1], createTriggersCall)
	}
	up, down = plan([]object{list("new."), creator}, []string{list("old.").text})
	if up[len(up)-1] != createTriggersCall || strings.Contains(strings.Join(down, "\n"), createTriggersCall) {
		t.Fatalf("a changed list with a new creator: up %q, down %q; want the call in the up only", up, down)
	}
	up, _ = plan([]object{list("old."), creator}, []string{old + "\n-- f: x.\nSELECT 1;\n"})
	if up != nil {
		t.Fatalf("nothing changed, yet the plan is %q", up)
	}
}
