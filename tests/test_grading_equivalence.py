"""Normalisation and equivalence, per category, decided by the fast path (no worker).

Each row is (prediction inside \\boxed{}, gold, expected verdict). The grader runs with
``use_worker=False``, so these also check that the fast path decides every row itself.
"""

from __future__ import annotations

import pytest

from reasoning_env.grading import Grader, normalize_answer

CATEGORIES = {
    "dfrac-tfrac": [
        (r"\dfrac{1}{2}", r"\frac12", True),
        (r"\tfrac{3}{4}", "0.75", True),
        (r"\frac{3}{5}", r"\dfrac{3}{4}", False),
    ],
    "left-right": [
        (r"\left[ 1, 2 \right)", "[1,2)", True),
        (r"\left( 1, 2 \right]", "(1,2)", False),
        (r"(3, \frac{\pi}{2})", r"\left( 3, \frac{\pi}{2} \right)", True),
    ],
    "text-wrappers": [
        (r"\text{Monday}", r"\text{monday}", True),
        (r"\text{Monday}", r"\text{Tuesday}", False),
        (r"\text{No}", "no", True),
        (r"\text{the ellipse}", r"\text{ellipse}", True),
        (r"\mbox{5 inches}", "5", True),
    ],
    "units-currency": [
        (r"5\text{ cm}", "5", True),
        (r"7 \text{ cm}^2", "7", True),
        ("864", r"864 \mbox{ inches}^2", True),
        (r"\$18.90", "18.9", True),
        ("18.90 dollars", "18.90", True),
        ("5 apples", "5", True),
        ("€12", "12", True),
        ("12", r"13 \text{ dollars}", False),
        (r"12^{\text{th}}", "12", True),
        (r"5 \text{ hours}", "5", True),
        # several quantities are not their first number (math-verify read only the first)
        (r"5 \text{ hours } 30 \text{ minutes}", "5", False),
        (r"5 \text{ dollars } 3 \text{ cents}", "5", False),
        (r"6\text{ apples and }5\text{ pears}", "6", False),
        (r"5\text{ dollars and }3\text{ cents}", "5", False),
        ("5", r"5 \text{ hours } 30 \text{ minutes}", False),
        (r"5 \text{ hours } 30 \text{ minutes}", r"5\text{ hours }30\text{ minutes}", True),
    ],
    # A trailing \text{...} is a unit only if no word in it changes the meaning (reward hacks:
    # each of these graded exact-correct against 3 when any trailing words were stripped).
    "unit-words-that-change-meaning": [
        (r"3 \text{ thousand}", "3", False),
        (r"3 \text{ squared}", "3", False),
        (r"3 \text{ is wrong}", "3", False),
        (r"3 \text{ is not the answer}", "3", False),
        (r"3 \text{ or four}", "3", False),
        (r"3 \text{ plus one}", "3", False),
        (r"3 \text{ square}", "3", False),  # a modifier with no unit after it
        (r"3 \text{ hundreds}", "3", False),
        (r"3 \text{ k}", "3", False),  # 3000
        (r"3 \text{ grand}", "3", False),
        (r"3 \text{ dozen eggs}", "3", False),
        # "more", "fewer", "times" alone do not change the number ("how many more ...?": 15 more
        # apples); with "than" / "or" they do, and those words are refused.
        (r"3 \text{ more apples}", "3", True),
        (r"3 \text{ fewer}", "3", True),
        (r"3 \text{ times}", "3", True),
        (r"3 \text{ or more}", "3", False),
        (r"3 \text{ more than}", "3", False),
        (r"3 \text{ less than}", "3", False),
        (r"3 \text{ (wrong)}", "3", False),
        (r"3 \text{ students}", "3", True),
        (r"3 \text{ square units}", "3", True),
        (r"3 \mbox{ million}", "3", False),
        (r"3 \mathrm{ not}", "3", False),
        ("3 million", "3", False),
        ("3 xy", "3", False),  # plain letters are not a unit
        ("3 not", "3", False),
        ("3 thousand", "3 thousand", True),  # exact match still counts
        (r"5 \text{ m}", r"5 \text{ cm}", False),  # both known units, different
        (r"5 \text{ cm}", r"5 \text{ m}", False),
        (r"5 \text{ cm}^2", r"5 \text{ cm}", False),
        ("30 radians", r"30^\circ", False),
        (r"5 \text{ inches}", r"5 \text{ in}", True),  # aliases of one unit
        (r"5 \text{ hr}", r"5 \text{ hours}", True),
        (r"5 \text{ square inches}", r"5 \text{ in}^2", True),
        (r"30 \text{ degrees}", r"30^\circ", True),
        (r"5 \text{ m}", "5", True),  # a unit against a bare gold is still dropped
        (r"18 \text{ dollars}", "18", True),
        (r"5 \text{ apples}", "5", True),
        (r"20 \text{ minutes}", "20", True),
        (r"3 \text{ cm}^2", "3", True),
        (r"\$5", "5", True),
        (r"20 \text{ miles per hour}", "20", True),
        ("5 cm", "5", True),
        ("5 kg", "5", True),
        (r"3 \text{ percent}", r"3\%", True),  # percent as a word is %
        (r"3 \text{ percent}", "0.03", True),
        (r"3 \text{ percent}", "3", True),
    ],
    # Logic connectives / implications / equivalences count only as an exact match
    # (math-verify graded the last equation: "x=3 \lor x=4" was correct against 4).
    "logic-connectives": [
        (r"x=3 \lor x=4", "4", False),
        (r"x=3 \land x=4", "4", False),
        (r"3 \vee 4", "4", False),
        (r"3 \wedge 4", "4", False),
        (r"x=3 \iff x=4", "4", False),
        (r"x=3 \implies x=4", "4", False),
        (r"3 \Rightarrow 4", "4", False),
        (r"3 \equiv 4", "4", False),
        (r"3 \neq 4", "4", False),
        (r"3 \ne 4", "4", False),
        (r"3 \not= 4", "4", False),
        (r"x=3 \lor x=4", r"x=3 \lor x=4", True),
        (r"x \ne 3", r"x \neq 3", True),  # \ne, \neq, \not= are one symbol
    ],
    "redundant-braces-sets-reals": [
        ("{" * 60 + "3" + "}" * 60, "3", True),  # redundant braces: no parse-depth fallback
        (r"\frac{{1}}{{2}}", "0.5", True),
        (r"\{1,2,2\}", r"\{1,2\}", True),  # a set has no repeated elements
        (r"\{1,2,2\}", r"\{1,2,3\}", False),
        (r"\text{all real numbers}", r"(-\infty,\infty)", True),
        ("all real numbers", r"\mathbb{R}", True),
        (r"\text{all real numbers}", r"(0,\infty)", False),
    ],
    "negative-points": [
        (r"\sqrt{x^2}", "x", False),  # equal for x > 0 only
        (r"\sqrt{x^2 y^2}", "xy", False),
        (r"x^{2/3}", r"\sqrt[3]{x^2}", True),  # real odd roots: (-8)^(2/3) = 4
        (r"\ln x^2", r"2\ln x", True),  # not real for x < 0: not compared there
        (r"\sqrt{x}", "x^{1/2}", True),
    ],
    "thousands": [
        ("1,000", "1000", True),
        ("1{,}000", "1000", True),
        (r"10,\!080", "10080", True),
        ("1,234,567", "1234567", True),
        ("(1,000)", "1000", False),  # a tuple, not a number
        ("1,000", "(1,0)", False),
        ("1,23", "123", False),  # not a thousands separator
    ],
    "percent": [
        (r"25\%", "25", True),
        (r"25\%", "0.25", True),
        ("25", r"25\%", True),
        ("0.25", r"25\%", True),
        ("25 percent", "25", True),
        (r"26\%", "25", False),
        (r"33\frac13\%", r"\frac13", True),  # exactly equal: the % binds the whole mixed number
        (r"33.33\%", r"\frac13", True),  # the decimal 0.3333, as "0.3333" vs 1/3
        (r"33\%", r"\frac13", False),  # 0.33: too few significant digits
        (r"-33.33\%", r"-\frac13", True),
    ],
    "degrees": [
        (r"30^\circ", "30", True),
        (r"30^{\circ}", "30", True),
        ("30°", "30", True),
        ("30 degrees", "30", True),
        ("30", r"45^\circ", False),
    ],
    "trailing-punctuation": [
        ("5.", "5", True),
        ("x = 5.", "5", True),
    ],
    "pi": [
        (r"\pi", "pi", True),
        ("2pi", r"2\pi", True),
        ("pi/2", r"\dfrac{\pi}{2}", True),
        ("-2*pi", r"-2\pi", True),
        ("3.14159", r"\pi", True),
        (r"\pi", "3.14", True),
        ("3.15", r"\pi", False),
        ("22/7", r"\pi", False),
    ],
    "scientific-notation": [
        ("1e3", "1000", True),
        (r"1.5\times10^{3}", "1500", True),
        (r"1.5 \cdot 10^3", "1500", True),
        ("2.5E-3", "0.0025", True),
        (r"6.02\times 10^{23}", "6.02e23", True),
        ("1e3", "1001", False),
        ("1e5000", "10^{5000}", True),  # over Python's 4,300-digit int-to-str limit
        ("1e99999", "10^{99999}", True),  # beyond exact literals: compared at 50 digits
        ("1e999999999", "1", False),  # never builds 10**999999999
        ("1e999999999", "10^{999999999}", True),
        ("1e-999999999", "0", False),  # nonzero, however small
    ],
    "fractions-vs-decimals": [
        ("0.3333", r"\frac13", True),
        ("0.6667", r"\frac23", True),
        ("0.6666", r"\frac23", True),  # truncated
        ("0.0833333333333333", r"\frac{1}{12}", True),
        ("4.123105625617661", r"\sqrt{17}", True),
        ("0.33", r"\frac13", False),  # fewer than 3 significant digits
        ("0.6665", r"\frac23", False),
        ("3.14159265", r"\pi", True),
        ("3.14159266", r"\pi", False),
        ("0.51", "0.5", False),  # two decimals must be equal
        ("2.0000001", "2", False),
        (r"\frac{1}{2006!}", r"\frac{1}{2004!}", False),  # no 6-decimal rounding
        (r"\frac{1}{2^{98}}", r"\frac{1}{2^{99}}", False),
        (r"\frac{2005 \cdot 2006}{2006!}", r"\frac{1}{2004!}", True),
        ("100001", "100000", False),  # no relative tolerance on integers
        (r"\frac{2}{4}", r"\frac{1}{2}", True),
        # a rounded decimal matches only a rational whose expansion does not terminate
        ("1.00", r"\frac{201}{200}", False),  # 201/200 = 1.005 is written exactly
        ("1.005", r"\frac{201}{200}", True),
        ("0.333", r"\frac{3333}{10000}", False),
        ("10.0", r"\frac{201}{20}", False),
        ("1.00", "1+10^{-9}", False),
        (r"\frac{201}{200}", "1.00", False),  # a decimal gold: the same rule
        (r"\frac13", "0.3333", True),
        ("0.2857", r"\frac27", True),
        ("0.286", r"\frac27", True),
        ("33.3", r"\frac{100}{3}", True),
        ("1.414", r"\sqrt2", True),  # irrational constants keep the rounding rule
        ("3.14", r"\pi", True),
    ],
    "sign": [
        ("-3", "3", False),
        (r"-\frac{1}{2}", "-0.5", True),
        ("-(-2)", "2", True),
        (r"-\frac{1}{2}", r"\frac{1}{2}", False),
    ],
    "plus-minus": [
        (r"\pm 3", "3, -3", True),
        ("3", r"\pm 3", False),
        ("-3, 3", r"\pm 3", True),
        (r"x = \pm 3", r"\pm 3", True),
        (r"1 + \sqrt{19}, 1 - \sqrt{19}", r"1 \pm \sqrt{19}", True),
        (r"2 \mp \sqrt{3}", r"2 \pm \sqrt 3", True),
        ("2021", r"\pm 2021", False),
    ],
    "intervals": [
        ("(1, 2)", "(1,2)", True),
        ("[1, 2]", "(1,2)", False),
        ("(1, 2)", "[1, 2]", False),
        ("[1, 2)", "[1,2]", False),
        (r"(-\infty, 3]", r"(-\infty,3]", True),
        (r"(-\infty, 3)", r"(-\infty,3]", False),
        (r"\mathbb{R}", r"(-\infty,\infty)", True),
        (r"\mathbb{R}", r"(0,\infty)", False),
        (r"(0,1) \cup (2,3)", r"(2,3)\cup(0,1)", True),
        (r"(0,1) \cup (2,3)", "(0,1)", False),
        (r"[\sqrt{2}, +\infty)", r"m \geq \sqrt{2}", True),
        ("x > 3", r"(3, \infty)", True),
        (r"x \ge 3", r"(3, \infty)", False),
        (r"3 < x \le 5", "(3,5]", True),
        (r"x \in [-2, 7]", "[-2,7]", True),
    ],
    "sets-and-lists": [
        (r"\{3, 1, 2\}", r"\{1,2,3\}", True),
        ("1, 2, 3", "3, 2, 1", True),
        (r"\{1, 2\}", "1, 2", True),
        (r"\emptyset", r"\{\}", True),
        (r"1 \text{ and } 2", "1, 2", True),
        ("1728", r"1331 \text{ and } 1728", False),  # a subset of a multi-answer gold
        ("1, 2", "1, 2, 3", False),
    ],
    "tuples": [
        ("(1, 2)", "(2, 1)", False),
        ("(1,4.5)", r"(1,\frac{9}{2})", True),
        ("(1,2,3)", "(1,2)", False),
        ("x=5, y=3", "(5,3)", True),
    ],
    "matrices": [
        (r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}", True),
        (r"\begin{pmatrix} 1 & 2 \\ 3 & 5 \end{pmatrix}", r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", False),
        (r"\begin{pmatrix} 1/2 \\ 2 \end{pmatrix}", r"\begin{pmatrix} 0.5 \\ 2 \end{pmatrix}", True),
        (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", "(1,2)", True),
    ],
    "equations-assignments": [
        ("x = 5", "5", True),
        ("3", "x=3", True),
        ("5 = x", "5", True),
        ("x = 4", "3", False),
        ("y = 3", "x = 3", False),
        (r"y = -\frac{1}{2}x + \frac{3}{4}", "2x+4y-3=0", True),
        ("-34x-45y+20z-100=0", "34x+45y-20z+100=0", True),
        (r"\frac{x^2}{16}+\frac{y^2}{12}=1", r"\frac{x^2}{4}+\frac{y^2}{3}=1", False),
        ("y = 2x + 3", "y = 3x + 2", False),
        ("2x = 6", "x = 3", True),
        ("x^2 = 9", "x = 3", False),
        (r"x = 1 \text{ or } x = 2", "2, 1", True),
        ("n=1, 2, 3", "n=2, 3, 4", False),
        ("D = (0, 1.5)", "D = (0, 1)", False),
        (r"Y(x)=A+\frac{B}{x}-x", r"Y(x)=-x+C+\frac{D}{x}", True),  # renamed constants
        ("1:00", "12:00", False),
    ],
    "multiple-choice": [
        ("B", "B", True),
        ("(B)", "B", True),
        (r"\text{(B)}", "B", True),
        (r"\textbf{(B)}", r"\text{(B)}", True),
        ("C", "B", False),
        (r"\textbf{(E)}\ 10", "E", True),  # AMC: the letter, then its option's value
        (r"(E)\ 10", r"\textbf{(E)}", True),
        (r"\textbf{(D)}\ 10", "E", False),
        (r"(E)\ 10", "10", True),
        (r"(E)\ 12", r"(E)\ 10", False),
        (r"\textbf{(E)}~10", "E", True),
        ("(E) 10", "E", True),
        (r"(B)\ \frac{1}{2}", "0.5", True),
        # several letters, or a letter with anything but one plain value: exact match only
        (r"(A), (B), (C), (D), (E)", "A", False),
        (r"(A)(B)(C)(D)(E)", "A", False),
        (r"(A) \text{ or } (B)", "A", False),
        ("(A) or (B)", "A", False),
        (r"(C)+(D)", "C", False),
        (r"(C)\,(D)", "C", False),
        (r"(C) \text{ and } (D)", "C", False),
        (r"\text{(C)}+1", "C", False),
        (r"(C)^2", "C", False),
        (r"(C)/1", "C", False),
        (r"\text{(C)}\cdot 0", "C", False),
        (r"(A), (B)", "(A),(B)", True),
    ],
    "expressions": [
        ("(x+1)^2", "x^2+2x+1", True),
        ("(x+1)^2", "x^2+1", False),
        (r"\dfrac{9a + 11}{20}", r"\frac{11+9a}{20}", True),
        (r"\sec^2(y)", r"\tan^2(y)+1", True),
        (r"\sin^2 x + \cos^2 x", "1", True),
        ("x + 1", "y + 1", False),
        (r"2\sin x \cos x", r"\sin(2x)", True),
        ("-1 + exp(16)", "e^{16} - 1", True),
        (r"\ln(e^2)", "2", True),
        (r"\log_2 8", "3", True),
        (r"\sqrt[3]{-8}", "-2", True),
        (r"e^{i\pi}", "-1", True),
        (r"\binom{5}{2}", "10", True),
        ("3+4i", "4i+3", True),
        ("3-4i", "3+4i", False),
        (r"2\sqrt{2}", r"\sqrt{8}", True),
        (r"1\frac{4}{5}", r"\frac95", True),
        (r"137 \frac{1}{2}", "137.5", True),
        ("1 1/2", "3/2", True),  # mixed number with a space
        ("1 1/2", "11/2", False),  # not eleven halves
        (r"-1\frac12", "-3/2", True),  # -(1 + 1/2), not -1 * 1/2
        ("-1 1/2", "-1.5", True),
        (r"0.\overline{3}", r"\frac13", True),
        (r"4\sqrt(2)", "4", False),
        (r"\sin(\pi)", "0", True),  # zero vs a tiny value: settled at 1024 bits
        (r"e^{x}\cdot 10^{30} + \sin(x) - e^x \cdot 10^{30}", r"\sin x", True),  # cancellation
        (r"e^{x}\cdot 10^{30} + \sin(x) - e^x \cdot 10^{30}", r"\sin x + 10^{-20}", False),
        ("52", "52_8", True),  # digits of a base-8 answer without the subscript
        ("42", "52_8", False),  # its decimal value is not the base-8 answer
    ],
    # Finite sums and products with constant integer bounds are evaluated (exactly when the
    # value stays small, else at 256 bits); they used to wait for math-verify, often past 2 s.
    "sums-products": [
        (r"\sum_{k=1}^{100} k", "5050", True),
        (r"\sum_{k=1}^{100} k", "5051", False),
        (r"\sum_{k=1}^{100} k + 1", "5051", True),  # the body stops at +
        (r"\sum\limits_{k=1}^{3} k^2", "14", True),
        (r"6!\sum_{k=0}^{6}\frac{(-1)^k}{k!}", "265", True),
        (r"\sum_{i=1}^{3} i^2", "14", True),  # an index named i is not the imaginary unit
        (r"\sum_{i=1}^{100}\sum_{j=1}^{100} ij", "25502500", True),
        (r"\sum_{k=1}^{2000} \frac{1}{k(k+1)}", r"\frac{2000}{2001}", True),
        (r"\sum_{k=1}^{99} \frac{1}{\sqrt{k}+\sqrt{k+1}}", "9", True),
        (r"\sum_{k=0}^{1000} \binom{1000}{k}^2", r"\binom{2000}{1000}", True),
        (r"\sum_{k=1}^{10000} \frac{1}{k^2}", r"\frac{\pi^2}{6}", False),  # a partial sum
        (r"\sum_{k=1}^{1000} \sin(k)", "0", False),
        (r"\prod_{k=2}^{100} \left(1-\frac{1}{k^2}\right)", r"\frac{101}{200}", True),
        (r"\prod_{k=1}^{1000} \frac{k+1}{k}", "1000", False),
        (r"\sum_{k=5}^{1} k", "0", True),  # an empty sum
        # infinite series of the shapes Richardson extrapolation sums reliably
        (r"\sum_{n=1}^{\infty} \frac{1}{n^2}", r"\frac{\pi^2}{6}", True),
        (r"\sum_{n=0}^{\infty} \frac{(-1)^n}{2n+1}", r"\frac{\pi}{4}", True),
        (r"\sum_{n=1}^{\infty} \frac{n}{3^n}", r"\frac34", True),
        (r"\sum_{n=0}^{\infty} \frac{1}{n!}", "e", True),
        (r"\sum_{n=1}^{\infty} \frac{1}{n^2}", "1.645", True),  # a decimal gold: rounding rule
        (r"\sum_{n=1}^{\infty} \frac{1}{n^2}", r"\frac{\pi^2}{7}", False),
        (r"\sum_{n=1}^{\infty} \frac{1}{n(n+1)}", "2", False),
    ],
    # issue 14: the policies docs/grading.md states, one example each way
    "names-and-chains": [
        ("|PQ|=2", "2", True),
        ("2", "|PQ| = 2", True),
        (r"\frac{AM}{MB}=\frac{2}{\sqrt3}", r"\frac{2\sqrt3}{3}", True),
        (r"\angle ABC = 30^\circ", "30", True),
        ("(a,b)=(4,1)", "(4,1)", True),
        ("(a,b)=(4,1)", "b=1, a=4", True),
        ("(a,b)=(4,1)", "(1,4)", False),
        ("PQ=3, RS=7", "3, 7", True),
        ("m=2,n=3; m=5,n=3", "(2,3),(5,3)", True),
        ("y = 2+3 = 6 = 9", "y = 9", True),
        ("t = 4+4 = 3", "t = 1+2 = 3", True),
        ("y = 2+3 = 6 = 9", "y = 6", False),
        ("y = 9 = 6", "9", False),
        ("2x = 3", "3", False),
        ("x+1 = 3", "3", False),
        ("2+3 = 5", "5", False),
        ("(3,5)", "x=5, y=3", False),  # a named gold is ordered
    ],
    "inequalities-as-sets": [
        ("-y < -2", "y > 2", True),
        ("-y < -2", r"(2, \infty)", True),
        (r"-2y \geq -4", r"y \le 2", True),
        ("2x+1 > 5", "x > 2", True),
        (r"2 \le |w| \le 5", r"[-5,-2]\cup[2,5]", True),
        (r"|x-1| \le 2", "[-1,3]", True),
        (r"|x| > 3", r"(-\infty,-3)\cup(3,\infty)", True),
        ("-1 < g(t) < 2", "(-1,2)", True),
        ("-y < -2", "y < 2", False),
        ("y > 2", "x > 2", False),
        ("[2,5]", r"2 \le |w| \le 5", False),
        (r"|x| < 3", "[-3,3]", False),
    ],
    "approx": [
        (r"y = \frac{2}{7} \approx 0.29", r"\frac27", True),
        (r"\sqrt{50} \approx 7.07", r"5\sqrt2", True),
        (r"A = 16\pi \approx 50.27", r"16\pi", True),
        (r"y \approx 7", "7", True),
        (r"\approx 0.2857", r"\frac27", True),
        (r"x \approx 3.14", r"\pi", True),
        ("y ≈ 0.2857", r"\frac27", True),
        (r"y \approx 0.35", r"\frac27", False),
        (r"\frac27 \approx 0.35", r"\frac27", False),
        (r"y \approx 0.29", r"\frac27", False),
        (r"y \approx 7", "7.2", False),
        (r"y \approx 7", r"\sqrt{50}", False),
        (r"x \approx 3", r"\pi", False),
        (r"x = 1/3 \approx 1.3", r"\frac13", False),
    ],
    "number-words-and-percent-words": [
        (r"\text{five}", "5", True),
        ("twenty-one", "21", True),
        (r"\text{one hundred and five}", "105", True),
        ("three thousand", "3000", True),
        (r"\text{hundred}", "100", False),
        (r"\text{six}", "5", False),
        ("25 pct", r"25\%", True),
        ("25 percentage", r"25\%", True),
        (r"25 \textbf{ percent}", "0.25", True),
        (r"12\textbf{ cm}", "12", True),
        (r"5\,\mathrm{kg}", "5", True),
        ("26 pct", r"25\%", False),
    ],
    "repeats-and-points": [
        ("(2,3),(3,2),(2,3)", "(2,3),(3,2)", True),
        ("3, 3", "3", True),
        (r"(1, \pm 2)", "(1,2),(1,-2)", True),
        ("2, 3", "2, 2, 3", False),
        (r"(1, \pm 2)", "(1,2)", False),
        ("12\\\\", "12", True),
        ("13\\\\", "12", False),
    ],
}

ROWS = [(cat, p, g, e) for cat, rows in CATEGORIES.items() for p, g, e in rows]


@pytest.fixture(scope="module")
def grader() -> Grader:
    return Grader(use_worker=False)


@pytest.mark.parametrize("category,pred,gold,expected", ROWS, ids=[f"{r[0]}:{r[1]}|{r[2]}" for r in ROWS])
def test_equivalence(grader: Grader, category: str, pred: str, gold: str, expected: bool) -> None:
    result = grader.grade("So the answer is $\\boxed{" + pred + "}$.", gold)
    assert result.correct is expected, f"{category}: {pred!r} vs {gold!r}: {result}"
    # decided by the fast path, not by the "undecided -> mismatch" shortcut
    assert not result.detail.startswith("undecided"), result


def test_correct_reasons_are_from_the_vocabulary(grader: Grader) -> None:
    assert grader.grade(r"\boxed{5}", "5").reason == "exact"
    assert grader.grade(r"\boxed{0.5}", r"\frac12").reason == "numeric"
    assert grader.grade(r"\boxed{(x+1)^2}", "x^2+2x+1").reason == "equivalent"
    assert grader.grade(r"\boxed{4}", "5").reason == "mismatch"
    assert grader.grade("no box", "5").reason == "no_answer"


@pytest.mark.parametrize(
    "raw,expected",
    [
        (r"$\dfrac{1}{2}$", r"\frac{1}{2}"),
        (r"\left( 1, 2 \right)", "( 1, 2 )"),
        (r"10,\!080", "10080"),
        (r"864 \mbox{ inches}^2", "864"),
        (r"30^\circ", "30"),
        (r"\$32,\!348", "32348"),
        (r"\text{(C)}", "(C)"),
        (r"\boxed{\boxed{5}}", "5"),
        (r"(-\infty,-5]\cup[5,\infty)", r"(-\infty,-5]\cup[5,\infty)"),  # \infty survives
    ],
)
def test_normalisation(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_normalisation_is_idempotent() -> None:
    for _, p, g, _ in ROWS:
        for s in (p, g):
            once = normalize_answer(s)
            assert normalize_answer(once) == once, s


def test_piecewise_functions_of_variables_go_to_math_verify() -> None:
    """|x| equals x at positive random points: the fast path must not decide it."""
    fast = Grader(use_worker=False).grade(r"\boxed{|x|}", "x")
    assert fast.detail.startswith("undecided"), fast
    slow = Grader(timeout_s=20.0)
    assert slow.warm_up(wait_s=90.0)
    result = slow.grade(r"\boxed{|x|}", "x")
    assert result.correct is False and result.detail == "math-verify", result


@pytest.mark.parametrize(
    "pred,gold",
    [
        (r"x=3 \lor x=4", "4"),
        (r"3 \equiv 4", "4"),
        (r"3 \text{ thousand}", "3"),
        ("3 not", "3"),
        (r"3 \text{ is not the answer}", "3"),
        (r"(A) \text{ or } (B)", "A"),
        (r"\text{(C)}\cdot 0", "C"),
    ],
)
def test_hacks_are_decided_before_math_verify(pred: str, gold: str) -> None:
    """These went to math-verify, which read one equation or number and said correct; they
    are decided before the worker is ever asked (no worker starts here)."""
    grader = Grader(timeout_s=2.0)
    result = grader.grade(r"\boxed{" + pred + "}", gold)
    assert result.correct is False and result.reason == "mismatch", result
    assert result.detail != "math-verify", result
    assert grader._pool is None  # the pool was never touched


@pytest.mark.parametrize(
    "pred,gold",
    [
        (r"\sum_{k=1}^{10000} \frac{1}{k^2}", r"\frac{\pi^2}{6}"),
        (r"\sum_{k=1}^{1000} k^{1000}", "5"),
        (r"\sum_{k=0}^{1000} \binom{1000}{k}^2", r"\binom{2000}{1000}"),
        (r"\sum_{k=1}^{99} \frac{1}{\sqrt{k}+\sqrt{k+1}}", "9"),
    ],
)
def test_long_finite_sums_are_decided_without_math_verify(pred: str, gold: str) -> None:
    """These took math-verify past the 2 s limit; the fast path decides them (the speed figure
    is in ``python -m reasoning_env.bench cases --worst-case``, not asserted here)."""
    result = Grader(use_worker=False).grade(r"\boxed{" + pred + "}", gold)
    assert result.reason in ("numeric", "mismatch") and not result.detail.startswith("undecided"), result


@pytest.mark.parametrize(
    "series",
    [
        r"\sum_{n=1}^{\infty} \frac{1}{n}",  # diverges
        r"\sum_{n=1}^{\infty} 2^n",
        r"\sum_{n=1}^{\infty} (-1)^n",
        r"\sum_{n=1}^{\infty} \frac{1}{(n+1)^2 - n^2}",  # 1/(2n+1): the leading terms cancel
        r"\sum_{n=1}^{\infty} \frac{\sin n}{n}",  # converges, but outside the evaluated shapes
    ],
)
def test_series_outside_the_evaluated_shapes_are_undecided(series: str) -> None:
    """Divergent series, and shapes extrapolation may misjudge, are never given a value."""
    result = Grader(use_worker=False).grade(r"\boxed{" + series + "}", "1")
    assert result.correct is False and result.detail.startswith("undecided"), result


def test_sums_too_long_to_evaluate_are_left_to_math_verify() -> None:
    """Past MAX_SUM_WORK (terms x body size) the parser refuses a sum: no unbounded loop."""
    from reasoning_env.grading.latex import ParseError, parse_answer

    with pytest.raises(ParseError):
        parse_answer(r"\sum_{k=1}^{10^{10}} k")
    with pytest.raises(ParseError):
        parse_answer(r"\sum_{i=1}^{1000}\sum_{j=1}^{1000} ij")
    with pytest.raises(ParseError):
        parse_answer(r"\sum_{k=1}^{30000} k + \sum_{k=1}^{30000} k + \sum_{k=1}^{30000} k")  # each fits, not all


def test_single_letters_after_a_number_are_variables() -> None:
    """'k' is a magnitude word in a \\text tail (3 \\text{ k} = 3000), but a bare single letter
    after a number is a variable: \\sum_{k=1}^{3} k must not be refused as "a number followed by
    words" (the fast path now evaluates it; sums it cannot read still reach math-verify)."""
    from reasoning_env.grading.latex import words_after_number

    assert not words_after_number(r"\sum_{k=1}^{3} k")
    assert not words_after_number(r"\sum_{n=1}^{3} mn")
    assert words_after_number("3 thousand") and words_after_number("3 is wrong")
